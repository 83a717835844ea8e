"""Every command and option of fa-doctor, declared once: the parser, `--help`, shell completion, the early target
probe, the format of a usage error and `fleet`'s forwarded check options all read this table.

An option is declared once and listed by the commands that take it; `env` names its FA_DOCTOR_* default;
`check` (a function in `fa_doctor.cli.values`) turns the text into the value or raises ValueError with the reason;
`forward` marks the check options `fleet` passes on to each node's `fa-doctor check`.
"""

from __future__ import annotations

FLAG, VALUE, MANY = "flag", "value", "many"  # what an option takes: nothing, one value, one value per use


class Option:
    __slots__ = ("check", "complete", "default", "dest", "env", "flags", "forward", "help", "kind", "metavar")

    def __init__(
        self,
        flags: tuple[str, ...],
        dest: str,
        kind: str = FLAG,
        help: str = "",
        *,
        metavar: str = "",
        env: str = "",
        default: object = None,
        check: str = "",
        forward: bool = False,
        complete: str = "",  # "files", or a function in fa_doctor.cli.values naming the choices
    ) -> None:
        self.flags, self.dest, self.kind, self.help = flags, dest, kind, help
        self.metavar, self.env, self.check, self.forward, self.complete = metavar, env, check, forward, complete
        self.default = default if default is not None else ((() if kind == MANY else None) if kind != FLAG else False)

    @property
    def name(self) -> str:
        return self.flags[-1]


class Argument:
    """A positional: `count` is "1", "?", "+" or "rest" (everything from the first positional or `--` on: exec's
    COMMAND, whose options are not fa-doctor's)."""

    __slots__ = ("check", "complete", "count", "dest", "help", "metavar")

    def __init__(self, dest: str, metavar: str, count: str, help: str, check: str = "", complete: str = "") -> None:
        self.dest, self.metavar, self.count, self.help, self.check, self.complete = (
            dest,
            metavar,
            count,
            help,
            check,
            complete,
        )


class Command:
    __slots__ = ("arguments", "epilog", "help", "name", "options")

    def __init__(
        self, name: str, help: str, epilog: str, options: tuple[Option, ...], arguments: tuple[Argument, ...] = ()
    ) -> None:
        self.name, self.help, self.epilog, self.options, self.arguments = name, help, epilog, options, arguments

    def option(self, flag: str) -> Option | None:
        for option in (*self.options, HELP):
            if flag in option.flags:
                return option
        return None

    @property
    def rest(self) -> bool:
        return bool(self.arguments) and self.arguments[-1].count == "rest"


# ---- the options ----------------------------------------------------------------------------------------------

PYTHON = Option(
    ("--python",), "python", VALUE, "Interpreter the server runs with (default: this one).",
    metavar="PATH", env="FA_DOCTOR_PYTHON", check="python_path", forward=True, complete="files",
)  # fmt: skip
FORMAT = Option(
    ("--format",), "format", VALUE, "The report's format.",
    metavar="FORMAT", env="FA_DOCTOR_FORMAT", default="human", check="report_format", complete="formats",
)  # fmt: skip
JSON = Option(("--json",), "json", FLAG, "Same as --format json: one JSON document.")
JUNIT = Option(
    ("--junit-xml",), "junit", VALUE, "Also write JUnit XML to PATH.", metavar="PATH", check="path", complete="files"
)
MARKDOWN = Option(
    ("--markdown",), "markdown", VALUE, "Also write a Markdown summary.", metavar="PATH", check="path", complete="files"
)
SUMMARY = Option(("--step-summary",), "step_summary", FLAG, "Append the Markdown summary to $GITHUB_STEP_SUMMARY.")
VERBOSE = Option(("-v", "--verbose"), "verbose", FLAG, "Show every finding with evidence and timings.",
                 env="FA_DOCTOR_VERBOSE")  # fmt: skip
QUIET = Option(("-q", "--quiet"), "quiet", FLAG, "Only the verdict line and what fails; no progress.",
               env="FA_DOCTOR_QUIET")  # fmt: skip
STRICT = Option(("--strict",), "strict", FLAG, "Warnings fail too (exit 1).", env="FA_DOCTOR_STRICT", forward=True)
NO_SMOKE = Option(("--no-smoke",), "no_smoke", FLAG, "Static check only: run no kernel.", env="FA_DOCTOR_NO_SMOKE",
                  forward=True)  # fmt: skip
SMOKE_ALL = Option(("--all",), "smoke_all", FLAG, "Smoke-test every installed FA implementation.", forward=True)
REQUIRE_GPU = Option(("--require-gpu",), "require_gpu", FLAG, "No GPU (or a skipped smoke test) fails.", forward=True)
TIMEOUT = Option(
    ("--timeout",), "timeout", VALUE, "Seconds allowed per smoke-test child.",
    metavar="SECONDS", env="FA_DOCTOR_TIMEOUT", default=300.0, check="seconds", forward=True,
)  # fmt: skip
NO_CACHE = Option(("--no-cache",), "no_cache", FLAG, "Bypass fa-doctor's FA4 compile cache.", env="FA_DOCTOR_NO_CACHE",
                  forward=True)  # fmt: skip
FRESH = Option(("--fresh",), "fresh", FLAG, "Run the smoke test even if a passing verdict still holds.")
GPUS = Option(
    ("--gpus",), "gpus", VALUE, "Check and smoke-test only these CUDA indices, e.g. 0,2.",
    metavar="LIST", env="FA_DOCTOR_GPUS", check="gpu_list", forward=True,
)  # fmt: skip
GPU_ARCH = Option(
    ("--gpu-arch",), "gpu_arch", VALUE, "Judge compiled FA extensions for these GPUs (sm_90,sm_100 or 9.0,10.0).",
    metavar="LIST", env="FA_DOCTOR_GPU_ARCH", check="gpu_arch", forward=True,
)  # fmt: skip
NO_COLOR = Option(("--no-color",), "no_color", FLAG,
                  "No colours (NO_COLOR, FORCE_COLOR: force-color.org's order; this flag wins).")  # fmt: skip
ATTENTION = Option(("--attention-backend",), "attention", VALUE, "As given to SGLang (fa3, fa4, flashinfer, ...).",
                   metavar="NAME", forward=True)  # fmt: skip
PREFILL = Option(("--prefill-attention-backend",), "prefill", VALUE, "As given to SGLang.", metavar="NAME",
                 forward=True)  # fmt: skip
DECODE = Option(("--decode-attention-backend",), "decode", VALUE, "As given to SGLang.", metavar="NAME",
                forward=True)  # fmt: skip
UNSET_OVERRIDE_EXEC = Option(("--unset-override",), "unset_override", FLAG,
                             "Check and start COMMAND without SGLANG_FLASHATTENTION_VERSION.")  # fmt: skip
HELP = Option(("-h", "--help"), "help", FLAG, "Show this message and exit.")

# Groups, in the order --help lists them.
REPORT = (FORMAT, JSON, JUNIT, MARKDOWN, SUMMARY, VERBOSE, QUIET, STRICT)
SMOKE = (NO_SMOKE, SMOKE_ALL, REQUIRE_GPU, TIMEOUT, NO_CACHE)
LAUNCH = (ATTENTION, PREFILL, DECODE)
GPU_SET = (GPUS, GPU_ARCH)

# ---- the commands ---------------------------------------------------------------------------------------------

# The exit-code contract (README, docs/architecture.md), at the foot of --help.
EXIT_CODES = (
    "Exit codes: 0 healthy or warnings only; 1 a failing finding (with --strict, a warning too); 2 misuse or an "
    "internal error; 130, 143, 129 interrupted by SIGINT, SIGTERM, SIGHUP. Options marked [env var: FA_DOCTOR_...] "
    "take their default from that variable (an invalid value is a usage error, exit 2)."
)
EXIT_CODES_EXEC = (
    "Exit codes: 1 a failing finding (COMMAND not started, unless --warn-only); 2 misuse or an internal error; "
    "126 COMMAND is not executable or its #! interpreter is missing, 127 COMMAND not found; 130, 143, 129 "
    "interrupted by SIGINT, SIGTERM, SIGHUP; once COMMAND runs, its own exit code (fa-doctor becomes it)."
)

CHECK = Command(
    "check",
    "Diagnose the FlashAttention install of a Python environment.",
    EXIT_CODES,
    (PYTHON, *REPORT, *SMOKE, FRESH, *LAUNCH, *GPU_SET, NO_COLOR),
)
EXEC = Command(
    "exec",
    "Check, then replace fa-doctor with COMMAND (same PID); the report goes to stderr.",
    EXIT_CODES_EXEC,
    (
        PYTHON, *REPORT, NO_SMOKE, SMOKE_ALL, TIMEOUT, NO_CACHE, FRESH, *GPU_SET, NO_COLOR,
        Option(("--warn-only",), "warn_only", FLAG, "Start COMMAND even when a check fails."),
        Option(("--allow-no-gpu",), "allow_no_gpu", FLAG, "Do not fail when no GPU is visible."),
        UNSET_OVERRIDE_EXEC,
    ),
    (Argument("command", "-- COMMAND ...", "rest", "The server command to start.", complete="files"),),
)  # fmt: skip
EXPLAIN = Command(
    "explain",
    "Explain a pasted error or traceback: its cause, the fixes, and the check that confirms it.",
    EXIT_CODES,
    (
        Option(("--file",), "file", VALUE, "Read the error from PATH.", metavar="PATH", check="path", complete="files"),
        PYTHON, FORMAT, JSON, VERBOSE,
        Option(("--limit",), "limit", VALUE, "At most this many explanations (1-50).", metavar="N", default=5,
               check="limit"),
        NO_COLOR,
    ),
    (Argument("text", "[TEXT | -]", "?", "The error text; - reads standard input."),),
)  # fmt: skip
FIX = Command(
    "fix",
    "Apply what check found: unset the override (eval its output), or plan and apply the repairs.",
    EXIT_CODES,
    (
        Option(("--unset-override",), "unset_override", FLAG,
               "Print shell code that unsets SGLANG_FLASHATTENTION_VERSION (for eval)."),
        Option(("--set",), "set_value", VALUE, "Set it to N instead.", metavar="N", check="override_value",
               complete="override_values"),
        Option(("--shell",), "shell", VALUE, "The shell the code is for (default: the calling one).", metavar="SHELL",
               check="shell",
               complete="shells"),
        Option(("--env-file",), "env_files", MANY,
               "Also remove (or rewrite) the override's line in FILE (repeatable).", metavar="FILE", check="path",
               complete="files"),
        Option(("--dry-run",), "dry_run", FLAG, "Show the env-file diffs; write nothing."),
        Option(("--plan",), "plan_only", FLAG, "Print the repairs of the current findings (default)."),
        Option(("--apply",), "apply", FLAG, "Run the repairs in the target interpreter, then re-check."),
        Option(("-y", "--yes"), "yes", FLAG, "Do not ask before --apply (for CI)."),
        Option(("--only",), "only", MANY, "Repair only these findings (repeatable).", metavar="FINDING_ID"),
        Option(("--allow-torch-change",), "allow_torch_change", FLAG,
               "Also run repairs that replace torch (never taken otherwise)."),
        PYTHON, *LAUNCH, GPU_ARCH, FORMAT, JSON, VERBOSE, QUIET, STRICT, NO_SMOKE,
        Option(("--timeout",), "timeout", VALUE, "Seconds allowed per smoke-test child and per repair step.",
               metavar="SECONDS", env="FA_DOCTOR_TIMEOUT", default=TIMEOUT.default, check="seconds"),
        NO_COLOR,
    ),
)  # fmt: skip
MERGE = Command(
    "merge",
    "Merge node reports (check --json files, folders, JSON Lines) into one fleet report.",
    EXIT_CODES,
    (
        *REPORT,
        Option(("--expect",), "expect", VALUE, "Fewer node reports fail.", metavar="N", check="count"),
        NO_COLOR,
    ),
    (Argument("paths", "PATH... | -", "+", "Report files, folders, or - (stdin).", complete="files"),),
)  # fmt: skip
FLEET = Command(
    "fleet",
    "Run check on every node of a cluster (ENGINE: ray) and merge the reports into one fleet report.",
    EXIT_CODES,
    (
        Option(("--address",), "address", VALUE, "Ray cluster (default: auto).", metavar="ADDRESS"),
        Option(("--node-timeout",), "node_timeout", VALUE, "Seconds a node may take.", metavar="SECONDS",
               default=600.0, check="seconds"),
        PYTHON, *REPORT, *SMOKE, *LAUNCH, *GPU_SET, NO_COLOR,
    ),
    (Argument("engine", "ENGINE", "1", "ray: every alive Ray node.", check="engine", complete="engines"),),
)  # fmt: skip

COMMANDS = {c.name: c for c in (CHECK, EXEC, EXPLAIN, FIX, MERGE, FLEET)}
# The commands that inspect a target interpreter (entry.py starts its probe before anything else loads).
TARGET_COMMANDS = ("check", "exec", "fix")

ROOT_HELP = "Diagnose FlashAttention (FA2/FA3/FA4) installs before an LLM server starts."
ROOT = Command(
    "",
    ROOT_HELP,
    EXIT_CODES,
    (
        Option(("--version",), "version", FLAG, "Print the version."),
        Option(("--show-completion",), "show_completion", VALUE, "Print the completion script for SHELL.",
               metavar="SHELL", check="completion_shell", complete="completion_shells"),
        Option(("--install-completion",), "install_completion", VALUE,
               "Write the completion script for SHELL where that shell loads it.", metavar="SHELL",
               check="completion_shell", complete="completion_shells"),
    ),
)  # fmt: skip
