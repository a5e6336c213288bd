"""Local log-likelihood multiple-choice scorer.

- :mod:`judgecal.loglik.tasks`: task files (JSONL, HellaSwag text, lm-eval YAML) -> McTask
- :mod:`judgecal.loglik.split`: lm-eval's context/continuation tokenization
- :mod:`judgecal.loglik.hf`: the transformers backend (packed rows, LM head at scored positions)
- :mod:`judgecal.loglik.endpoint`: the OpenAI-compatible completions backend
- :mod:`judgecal.loglik.metrics`: acc, acc_norm, acc_bytes, acc_per_token, acc_pmi, diagnostics
- :mod:`judgecal.loglik.score`: ``score_task`` and ``compare_runs``
- :mod:`judgecal.loglik.lmeval_tasks`: lm-evaluation-harness tasks (names, YAML, groups, few-shot)
  built by lm-eval's own task machinery and scored by judgecal (needs the ``lmeval`` extra)
- :mod:`judgecal.loglik.lmeval_lm`: ``JudgecalLM``, judgecal's scorer as an lm-eval ``LM``

torch and transformers are imported only when the local backend is used.
"""

from judgecal.loglik.score import McResult, compare_runs, score_task
from judgecal.loglik.tasks import McItem, McTask, load_task

__all__ = ["McItem", "McResult", "McTask", "compare_runs", "load_task", "score_task"]
