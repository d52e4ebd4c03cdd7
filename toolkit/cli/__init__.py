"""The `toolkit` command line: one module per command (spaCy's `cli/`), registered from the table below
(litgpt's `__main__`). User errors print without a traceback and exit 1."""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from toolkit.cli import (
    bento,
    check,
    choose_thresholds,
    compare,
    demo,
    evaluate,
    export,
    export_data,
    import_data,
    predict,
    recipes,
    review,
    run,
    schema,
    serve,
)
from toolkit.cli.common import err_console
from toolkit.errors import ToolkitError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Fine-tune encoders and decoders to extract clauses and entities: check data, import/export, train, serve.",
)
# Command name -> its function (or its group of subcommands), in the order `toolkit --help` lists them.
COMMANDS = {
    "check": check.check,
    "import": import_data.import_,
    "export-data": export_data.export_data,
    "run": run.run,
    "recipes": recipes.app,
    "eval": evaluate.eval_,
    "predict": predict.predict,
    "review": review.review,
    "compare": compare.compare_,
    "choose-thresholds": choose_thresholds.choose_thresholds,
    "export": export.export_,
    "serve": serve.serve,
    "bento": bento.bento,
    "schema": schema.schema,
    "demo": demo.demo,
}
# Old names that still run their command, after saying the new one (hidden from --help).
ALIASES = {"tune": choose_thresholds.tune}
for _name, _command in COMMANDS.items():
    if isinstance(_command, typer.Typer):
        app.add_typer(_command, name=_name)
    else:
        app.command(_name)(_command)
for _name, _command in ALIASES.items():
    app.command(_name, hidden=True)(_command)


def main() -> None:
    try:
        app()
    except ToolkitError as exc:
        err_console.print(f"[bold red]error:[/bold red] {escape(exc.render())}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
