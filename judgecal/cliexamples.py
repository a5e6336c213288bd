"""One worked example per ``judgecal`` command, shown at the end of its ``--help`` (issue 21
item 6) and in docs/cli.md. Paths are those of the shared data sets (../shared/data, see
docs/data-formats.md)."""

from __future__ import annotations

import click

D = "../shared/data"

EXAMPLES: dict[str, list[str]] = {
    "db upgrade": ["judgecal db upgrade"],
    "db downgrade": ["judgecal db downgrade 0003            # says what it would lose, changes nothing",
                     "judgecal db downgrade 0003 --yes      # then does it"],
    "db current": ["judgecal db current"],
    "db refresh": ["judgecal db refresh      # after a batch of imports, ratings or fits: the pages read the results"],
    "import llmbar": [f"judgecal import llmbar {D}/llmbar/Natural",
                      f"judgecal import llmbar {D}/llmbar_repo   # the repository layout: six judges, every protocol"],
    "import pandalm": [f"judgecal import pandalm {D}/pandalm/testset-v1.json"],
    "import autoj": ["judgecal import autoj testdata_pairwise.jsonl   # Auto-J's pairwise test set (GAIR-NLP/auto-j)"],
    "import judgebench": ["judgecal import judgebench gpt.json   # a JudgeBench split (ScalerLab/JudgeBench)"],
    "import alpaca-eval": [f"judgecal import alpaca-eval {D}/alpaca_eval/results",
                           f"judgecal import alpaca-eval {D}/alpaca_eval/gpt4_1106_preview.json \\",
                           f"    --pair {D}/alpaca_eval/gpt4_1106_preview_concise.json {D}/alpaca_eval/gpt4_1106_preview_verbose.json"],
    "import jsonl": ["judgecal import jsonl --kind responses answers.jsonl --task-family my-task",
                     "judgecal import jsonl --kind labels labels.jsonl"],
    "import csv": ["judgecal import csv --kind ratings ratings.csv"],
    "stats": ["judgecal stats", "judgecal stats --format json"],
    "lengths": ["judgecal lengths --tokenizer smollm2", "judgecal lengths --tokenizer words"],
    "model pull": ["judgecal model pull"],
    "rate": ["judgecal rate --serve smollm2 --judge smollm2 --task-family llmbar/Natural --items 40",
             "judgecal rate --base-url http://127.0.0.1:8000/v1 --judge my-judge --prompt pointwise_v1 --concurrency 8"],
    "fit": ["judgecal fit --task-family llmbar/Natural --judge GPT-4 --bootstrap 500 --seed 0"],
    "report": ["judgecal report", "judgecal report --format html --out out/report",
               "judgecal report --calibration 3 --task-family llmbar/Adversarial_GPTInst   # a transfer"],
    "audit": ["judgecal audit --task-family alpaca_eval --judge weighted_alpaca_eval_gpt4_turbo --model claude-2 "
              "--filter won_longer",
              "judgecal audit --task-family llmbar/Natural --judge GPT-4 --q python --filter flips --format json"],
    "leaderboard": ["judgecal leaderboard --judge GPT-4 --task-family llmbar/Natural",
                    "judgecal leaderboard --baseline gpt4_1106_preview --task-family alpaca_eval --format alpaca-eval",
                    "judgecal leaderboard --baseline gpt4_1106_preview --columns model,win_rate,length_controlled_winrate"],
    "bt": ["judgecal bt --task-family alpaca_eval --baseline gpt4_1106_preview",
           "judgecal bt --task-family alpaca_eval --outcome verdict --bootstrap 200 --format json",
           "judgecal bt --task-family alpaca_eval --control both",
           "judgecal bt --task-family alpaca_eval --control length --length-unit words --coefficients --format csv"],
    "check": ["judgecal check --judge GPT-4 --max-verbosity-winrate 0.55 --min-agreement-gain -0.05",
              "judgecal check --task-family llmbar/Natural --judge GPT-4 --publish calibrated   # gate the calibration itself"],
    "publish": ["judgecal publish --task-family llmbar/Natural --judge GPT-4",
                "judgecal publish --baseline gpt4_1106_preview --format csv > board.csv"],
    "judge": ["judgecal judge GPT-4/Vanilla", "judgecal judge id:2 --format json"],
    "mc score": [f"judgecal mc score --model smollm2 --task {D}/mc/arc_easy.jsonl --limit 100",
                 "judgecal mc score --model smollm2 --task arc_easy,piqa --num-fewshot 5 --output-path out/lm-eval",
                 "judgecal mc score --model smollm2 --task my_tasks/ppl_local.yaml --max-length 512   # perplexity, bits per byte"],
    "mc list": ["judgecal mc list"],
    "mc export": ["judgecal mc export 1 items.jsonl"],
    "mc compare": ["judgecal mc compare 1 2"],
    "export": ["judgecal export ratings ratings.jsonl --task-family llmbar/Natural",
               "judgecal export leaderboard board.csv --judge GPT-4"],
    "serve": ["judgecal serve                                   # http://127.0.0.1:8765/",
              "judgecal serve --host 0.0.0.0 --token \"$(openssl rand -hex 16)\"   # a team server"],
}


def attach(group: click.Group, prefix: str = "") -> list[str]:
    """Set each command's ``epilog`` to its example (kept as written: Click's ``\\b``); returns
    the command paths that have none (a test keeps that list empty)."""
    missing = []
    for name, cmd in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            missing += attach(cmd, path + " ")
            continue
        lines = EXAMPLES.get(path)
        if not lines:
            missing.append(path)
            continue
        cmd.epilog = "\b\nExample" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join("  " + x for x in lines)
    return missing
