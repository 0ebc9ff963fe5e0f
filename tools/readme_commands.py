"""The README's commands, read out of its fenced `sh` blocks (tests run or check them).

A block is a shell script: `\\` continues a line, `#` starts a comment, `NAME="…"` sets a
variable later commands expand, and a here-document (`<<'EOF'` … `EOF`) is part of its command.
`agent_commands` gives every `python -m agents …` command as its argument list, with the block's
own variables expanded (`$KEY`, `$ROLE`) and any other variable left as written (`$HOME`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
AGENTS = ("python", "-m", "agents")


@dataclass(frozen=True)
class AgentCommand:
    """One `python -m agents` command of the README: its section and its arguments."""

    section: str
    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.argv[0]

    def option(self, flag: str) -> str | None:
        """The value of `flag` (its last occurrence), or None when the command omits it."""
        found = None
        for i, arg in enumerate(self.argv[:-1]):
            if arg == flag:
                found = self.argv[i + 1]
        return found

    def options(self, flag: str) -> list[str]:
        return [self.argv[i + 1] for i, a in enumerate(self.argv[:-1]) if a == flag]


def sections(text: str) -> dict[str, str]:
    """{`## ` heading: its text up to the next one}."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def sh_blocks(text: str) -> list[str]:
    return FENCE.findall(text)


def logical_lines(block: str) -> list[str]:
    """The block's commands: continuations joined, comment lines dropped, a here-document kept
    with the command that opens it (its lines joined by newlines)."""
    out: list[str] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + " " + lines[i].strip()
            i += 1
        heredoc = HEREDOC.search(line)
        if heredoc:
            end = heredoc.group(1)
            body = []
            while i < len(lines) and lines[i] != end:
                body.append(lines[i])
                i += 1
            i += 1
            line = "\n".join([line, *body, end])
        out.append(line)
    return out


def _expand(words: list[str], variables: dict[str, str]) -> list[str]:
    out: list[str] = []
    for word in words:
        name = word[1:] if word.startswith("$") else None
        if name in variables:
            out.extend(shlex.split(variables[name]))
        else:
            out.append(word)
    return out


def _command_words(line: str) -> list[str]:
    """The words of a command line, without its here-document, redirections and `&`."""
    words = shlex.split(line.split("<<")[0], comments=True)
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in (">", "2>", "1>"):
            skip = True
        elif word != "&" and not re.match(r"^[12]?>", word):
            out.append(word)
    return out


def agent_commands(text: str | None = None) -> list[AgentCommand]:
    """Every `python -m agents` command in the README's sh blocks, in order."""
    text = README.read_text() if text is None else text
    found: list[AgentCommand] = []
    for title, body in sections(text).items():
        for block in sh_blocks(body):
            variables: dict[str, str] = {}
            for line in logical_lines(block):
                words = _command_words(line)
                if words and words[0] == "export":
                    words = words[1:]
                if words and all(ASSIGNMENT.match(w) for w in words):
                    for word in words:
                        name, _, value = word.partition("=")
                        variables[name] = value
                    continue
                if tuple(words[:3]) == AGENTS:
                    found.append(AgentCommand(title, tuple(_expand(words[3:], variables))))
    return found
