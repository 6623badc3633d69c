"""A small checker of Graphviz DOT syntax (graphviz itself is not installed here): tokenizer and
recursive-descent parser of the grammar at https://graphviz.org/doc/info/lang.html (no HTML strings,
no ports, no ``+`` concatenation). ``parse`` returns the node ids, edges and attributes it read, with
quoted strings unescaped as graphviz reads them, or raises ``DotSyntaxError``."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

KEYWORDS = {"strict", "graph", "digraph", "node", "edge", "subgraph"}
_NAME = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*")
_NUMBER = re.compile(r"-?(\.[0-9]+|[0-9]+(\.[0-9]*)?)")


class DotSyntaxError(ValueError):
    pass


@dataclass
class Parsed:
    directed: bool = False
    name: str | None = None
    nodes: list[str] = field(default_factory=list)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)   # node id → its attributes
    subgraphs: list[str] = field(default_factory=list)


def _quoted(text: str, start: int) -> tuple[str, int]:
    """graphviz's lexer: \\" is a quote, \\\\ a kept backslash pair (one backslash when read as a label),
    backslash-newline a continuation; anything else is literal; an unescaped quote ends the string."""
    out: list[str] = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return "".join(out), index + 1
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '"\\\n':
            following = text[index + 1]
            out.append("" if following == "\n" else following)
            index += 2
            continue
        out.append(char)
        index += 1
    raise DotSyntaxError("unterminated string")


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif text.startswith(("--", "->"), index):
            tokens.append(("op", text[index:index + 2]))
            index += 2
        elif char in "{}[];,=:":
            tokens.append(("punct", char))
            index += 1
        elif char == '"':
            value, index = _quoted(text, index)
            tokens.append(("id", value))
        elif match := _NAME.match(text, index):
            word = match.group()
            tokens.append(("kw" if word.lower() in KEYWORDS else "id", word.lower() if word.lower() in KEYWORDS
                           else word))
            index = match.end()
        elif match := _NUMBER.match(text, index):
            tokens.append(("id", match.group()))
            index = match.end()
        else:
            raise DotSyntaxError(f"unexpected character {char!r} at {index}")
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.position, self.result = tokens, 0, Parsed()

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.position + offset
        return self.tokens[index] if index < len(self.tokens) else ("eof", "")

    def take(self, kind: str, value: str | None = None) -> str:
        token = self.peek()
        if token[0] != kind or (value is not None and token[1] != value):
            raise DotSyntaxError(f"expected {value or kind}, got {token} at token {self.position}")
        self.position += 1
        return token[1]

    def graph(self) -> Parsed:
        if self.peek() == ("kw", "strict"):
            self.position += 1
        kind = self.take("kw")
        if kind not in ("graph", "digraph"):
            raise DotSyntaxError("expected graph or digraph")
        self.result.directed = kind == "digraph"
        if self.peek()[0] == "id":
            self.result.name = self.take("id")
        self.block()
        if self.peek()[0] != "eof":
            raise DotSyntaxError(f"trailing tokens: {self.peek()}")
        return self.result

    def block(self) -> list[str]:
        self.take("punct", "{")
        members: list[str] = []
        while self.peek() != ("punct", "}"):
            members += self.statement()
            if self.peek() == ("punct", ";"):
                self.position += 1
        self.take("punct", "}")
        return members

    def attr_list(self) -> dict[str, str]:
        attributes: dict[str, str] = {}
        while self.peek() == ("punct", "["):
            self.position += 1
            while self.peek() != ("punct", "]"):
                key = self.take("id")
                self.take("punct", "=")
                attributes[key] = self.take("id")
                if self.peek() in (("punct", ";"), ("punct", ",")):
                    self.position += 1
            self.take("punct", "]")
        return attributes

    def operand(self) -> list[str]:
        if self.peek() == ("kw", "subgraph") or self.peek() == ("punct", "{"):
            return self.subgraph()
        node = self.take("id")
        if node not in self.result.nodes:
            self.result.nodes.append(node)
        return [node]

    def subgraph(self) -> list[str]:
        if self.peek() == ("kw", "subgraph"):
            self.position += 1
            if self.peek()[0] == "id":
                self.result.subgraphs.append(self.take("id"))
        return self.block()

    def statement(self) -> list[str]:
        token = self.peek()
        if token[0] == "kw" and token[1] in ("graph", "node", "edge"):
            self.position += 1
            self.attr_list()
            return []
        if token[0] == "id" and self.peek(1) == ("punct", "="):
            self.position += 1
            self.take("punct", "=")
            self.take("id")
            return []
        left = self.operand()
        members = list(left)
        chain = [left]
        while self.peek()[0] == "op":
            op = self.take("op")
            if op != ("->" if self.result.directed else "--"):
                raise DotSyntaxError(f"edge operator {op} in a {'digraph' if self.result.directed else 'graph'}")
            right = self.operand()
            chain.append(right)
            members += right
        attributes = self.attr_list()
        if len(chain) == 1 and len(left) == 1:
            self.result.attributes.setdefault(left[0], {}).update(attributes)
        for first, second in itertools.pairwise(chain):
            self.result.edges += [(a, b, attributes) for a in first for b in second]
        return members


def parse(text: str) -> Parsed:
    return _Parser(tokenize(text)).graph()
