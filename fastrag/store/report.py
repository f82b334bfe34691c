"""What reading sources did, file by file: documents read, lines and files skipped, and why.

A :class:`SourceReport` collects one :class:`FileResult` per file met, in
order; each problem is a :class:`SourceIssue` naming the file and, where
there is one, the line. Readers record into it and go on with the next
line or file, so one bad line never costs the rest of a run::

    report = SourceReport(on_issue=lambda issue: print(issue, file=sys.stderr))
    kb = KnowledgeBase.build(iter_documents(paths, report=report))
    for result in report.with_issues():
        print(result.describe())
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["FileResult", "FileStatus", "SourceIssue", "SourceReport"]

FileStatus = Literal["read", "partial", "skipped", "empty"]
"""``read``: every document; ``partial``: some, with problems; ``skipped``: none, with
problems; ``empty``: none and no problem."""


@dataclass(frozen=True, slots=True)
class SourceIssue:
    """One problem: the file, the line (1-based, ``None`` for the whole file) and the reason.

    ``skipped`` says what was left out because of it: ``"line"``,
    ``"document"``, ``"file"`` or ``"rest of the file"``.
    """

    path: Path
    line: int | None
    reason: str
    skipped: str = "file"

    @property
    def where(self) -> str:
        """``path:line``, or ``path`` for a whole-file problem."""
        return str(self.path) if self.line is None else f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}; {self.skipped} skipped"


@dataclass(slots=True)
class FileResult:
    """What happened to one file."""

    path: Path
    documents: int = 0
    issues: list[SourceIssue] = field(default_factory=list)

    @property
    def status(self) -> FileStatus:
        """``read``, ``partial``, ``skipped`` or ``empty`` (see :data:`FileStatus`)."""
        if self.issues:
            return "partial" if self.documents else "skipped"
        return "read" if self.documents else "empty"

    def describe(self, verb: str = "read") -> str:
        """One line, e.g. ``a.jsonl: 2 documents indexed; line 2 skipped: not valid JSON ...``."""
        docs = f"{self.documents:,} document{'s' if self.documents != 1 else ''} {verb}"
        if not self.issues:
            return f"{self.path}: {docs}" if self.documents else f"{self.path}: no documents"
        first, n = self.issues[0], len(self.issues)
        if not self.documents:
            more = f" ({n:,} problems, the first)" if n > 1 else ""
            return f"{self.path}: skipped, nothing {verb}{more}: {first.reason}"
        more = f"{n:,} problems, the first: " if n > 1 else ""
        return f"{self.path}: {docs}; {more}{_skipped(first)}: {first.reason}"


def _skipped(issue: SourceIssue) -> str:
    if issue.line is None:
        return f"{issue.skipped} skipped"
    if issue.skipped == "line":
        return f"line {issue.line} skipped"
    if issue.skipped == "rest of the file":
        return f"the rest of the file from line {issue.line} skipped"
    return f"the {issue.skipped} at line {issue.line} skipped"


class SourceReport:
    """Per-file results of reading sources.

    Parameters
    ----------
    on_issue : callable, optional
        Called with each :class:`SourceIssue` as it is recorded (to print it
        at once, for example).
    """

    def __init__(self, on_issue: Callable[[SourceIssue], None] | None = None) -> None:
        self._files: dict[Path, FileResult] = {}
        self._on_issue = on_issue

    def file(self, path: Path) -> FileResult:
        """The result of ``path`` (created empty on first use)."""
        result = self._files.get(path)
        if result is None:
            result = self._files[path] = FileResult(path)
        return result

    def document(self, path: Path) -> None:
        """Count one document read from ``path``."""
        self.file(path).documents += 1

    def issue(
        self, path: Path, reason: str, *, line: int | None = None, skipped: str = "file"
    ) -> SourceIssue:
        """Record a problem of ``path`` (at ``line``, if given) and what it made skip."""
        issue = SourceIssue(path, line, reason, skipped)
        self.file(path).issues.append(issue)
        if self._on_issue is not None:
            self._on_issue(issue)
        return issue

    @property
    def files(self) -> list[FileResult]:
        """Every file met, in order."""
        return list(self._files.values())

    @property
    def issues(self) -> list[SourceIssue]:
        """Every problem, file by file."""
        return [i for r in self._files.values() for i in r.issues]

    @property
    def documents(self) -> int:
        """Documents read, over all files."""
        return sum(r.documents for r in self._files.values())

    def with_issues(self) -> Iterator[FileResult]:
        """The files that had a problem."""
        return (r for r in self._files.values() if r.issues)
