"""The model name ``judgecal`` in lm-evaluation-harness's registry, for ``lm_eval --model judgecal``.

lm-eval 0.4.13 reads no plug-in entry points: a model name exists once something calls
``lm_eval.api.registry.model_registry.register`` (its ``@register_model`` decorator, or a lazy
``"module:Class"`` placeholder, the way lm-eval registers its own models in
``lm_eval/models/__init__.py``). judgecal's wheel ships ``judgecal-lmeval.pth``, which Python
runs at start-up (``site``): it calls :func:`install`, which adds an import hook and nothing
else (no lm-eval, torch or judgecal module is imported). When lm-eval imports its
``lm_eval.models`` package (its registry does, the first time a model is looked up), the hook
registers ``judgecal`` as the lazy placeholder ``judgecal.loglik.lmeval_lm:JudgecalLM``, next to
lm-eval's own names; the class is imported only when that name is asked for. So::

    lm_eval run --model judgecal --model_args pretrained=/path/to/model,dtype=float32 \\
        --device cpu --tasks arc_easy --include_path my_tasks/

works with an unmodified lm-eval. Importing :mod:`judgecal.loglik.lmeval_lm` registers the name
as well (its ``@register_model``). A failure here never stops Python from starting.
"""

from __future__ import annotations

import sys

MODEL_NAME = "judgecal"
TARGET = "judgecal.loglik.lmeval_lm:JudgecalLM"
WATCHED = "lm_eval.models"


def register() -> None:
    """Register ``judgecal`` in lm-eval's model registry (a lazy placeholder) unless it is there."""
    from lm_eval.api.registry import model_registry

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target=TARGET)


class _Finder:
    """A ``sys.meta_path`` finder that lets the other finders find ``lm_eval.models`` and
    registers ``judgecal`` right after that module has run."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib protocol
        if fullname != WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run = getattr(loader, "exec_module", None)
        if run is None:
            return spec

        def exec_module(module):  # noqa: ANN001
            run(module)
            try:
                register()
            except Exception:  # noqa: BLE001 - never break lm-eval's own import
                pass

        try:
            loader.exec_module = exec_module  # this spec's loader only
        except (AttributeError, TypeError):
            pass
        return spec


def install() -> None:
    """Called by ``judgecal-lmeval.pth`` at start-up: register now if lm-eval's models are
    already imported, else add the import hook (once)."""
    try:
        if WATCHED in sys.modules:
            register()
        elif not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
    except Exception:  # noqa: BLE001 - a .pth must never stop the interpreter
        pass
