"""`cca fmt`: print a .cca source in canonical form.

Canonical is 4-space indentation, one field per line, blocks in source order, the optional `=`
dropped (kept where it joins a key to a value), comments kept where they were (own-line comments
before what follows them, trailing comments after what precedes them), at most one blank line
kept between items, and one blank line between top-level blocks that span several lines.
`fmt(fmt(x)) == fmt(x)` and `parse(fmt(x))` compiles to the same facts as `parse(x)`.
"""

from __future__ import annotations

from ccattler.dsl.ast import File, Flag, ListValue, Node, Scalar
from ccattler.dsl.parser import parse

INDENT = "    "


def format_source(text: str, name: str = "<text>") -> str:
    """The canonical form of `text`; raises `DslError` when it does not parse."""
    return _Printer(parse(text, name)).run()


class _Printer:
    def __init__(self, file: File):
        self.file = file
        self.src_lines = file.text.split("\n")
        self.out: list[str] = []
        self.comments = file.comments
        self.next_comment = 0
        self.last_line = 0  # source line of the last thing written

    def run(self) -> str:
        previous: Node | None = None
        for block in self.file.blocks:
            if previous is not None and (previous.body is not None or block.body is not None):
                self._blank()
            self._node(block, 0, first=previous is None)
            previous = block
        self._comments_before(len(self.file.text) + 1, 0, first=not self.file.blocks)
        while self.out and self.out[-1] == "":
            self.out.pop()
        return "\n".join(self.out) + "\n" if self.out else ""

    # ---- layout ----------------------------------------------------------------------------
    def _blank(self) -> None:
        if self.out and self.out[-1] != "":
            self.out.append("")

    def _gap(self, line: int, first: bool) -> None:
        """Keep one blank line where the source had at least one."""
        if first or not self.last_line:
            return
        between = self.src_lines[self.last_line : line - 1]
        if any(not text.strip(" \t;") for text in between):
            self._blank()

    def _comments_before(self, offset: int, depth: int, first: bool) -> None:
        while self.next_comment < len(self.comments) and self.comments[self.next_comment].span.start < offset:
            comment = self.comments[self.next_comment]
            self._gap(comment.span.line, first)
            first = False
            self.out.append(INDENT * depth + comment.text)
            self.last_line = comment.span.line
            self.next_comment += 1

    def _trailing(self, offset: int) -> None:
        """Append comments that follow `offset` on the same source line to the last line written."""
        text = self.file.text
        while self.next_comment < len(self.comments):
            comment = self.comments[self.next_comment]
            if comment.own_line or text.find("\n", offset, comment.span.start) != -1:
                return
            if text[offset : comment.span.start].strip(" \t;"):  # something else stands between
                return
            self.out[-1] += "  " + comment.text
            self.next_comment += 1

    # ---- nodes -----------------------------------------------------------------------------
    def _node(self, node: Node, depth: int, first: bool) -> None:
        before = self.next_comment
        self._comments_before(node.span.start, depth, first)
        self._gap(node.span.line, first and self.next_comment == before)
        pad = INDENT * depth
        head = pad + _head(node, pad)
        if node.body is None:
            self.out.extend(head.split("\n"))
            self.last_line = node.span.end_line
            self._trailing(node.span.end)
            return
        self.out.append(head + " {" if head.strip() else head + "{")
        self.last_line = node.span.line
        self._trailing(node.body_open)
        child_first = True
        for child in node.body:
            self._node(child, depth + 1, child_first)
            child_first = False
        self._comments_before(node.body_close, depth + 1, child_first)
        self.out.append(pad + "}")
        self.last_line = node.span.end_line
        self._trailing(node.span.end)


def _head(node: Node, pad: str) -> str:
    parts = [] if node.keyword == "entry" else [node.keyword]
    if node.key is not None:
        parts += [node.key.raw, "="]
    parts += [_arg(arg, pad) for arg in node.args]
    return " ".join(parts)


def _arg(arg: Scalar | ListValue | Flag, pad: str) -> str:
    if isinstance(arg, Flag):
        return arg.word
    if isinstance(arg, ListValue):
        inner = [item.raw for item in arg.items]
        return f"[{', '.join(inner)}]" if arg.brackets else ",".join(inner)
    if arg.style == "text":
        return _text(arg.value, pad)
    return arg.raw


def _text(value: str, pad: str) -> str:
    """A text block: content one level deeper than its field, closing quotes at the field's level."""
    if not value:
        return '""""""'
    lines = value.split("\n")
    closing_alone = lines[-1] == ""
    if closing_alone:
        lines.pop()
    body = "\n".join(pad + INDENT + line if line.strip() else "" for line in lines)
    return '"""\n' + body + ("\n" + pad + '"""' if closing_alone else '"""')
