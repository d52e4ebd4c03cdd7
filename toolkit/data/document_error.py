"""The error of one document or file that cannot be read (`toolkit predict` reports it as that file's failure
and goes on), apart from the readers so that each can raise it."""

from __future__ import annotations


class DocumentError(Exception):
    """One document (or file) that could not be read: the reason and what to do about it."""

    def __init__(self, reason: str, fix: str):
        super().__init__(reason)
        self.reason, self.fix = reason, fix
