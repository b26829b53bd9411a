"""The wire-model options of issue 33, measured on the same lines: ``python benchmarks/bench_wire_options.py FILE...``.

Each FILE is a native or pi session (e.g. ``benchmarks/bench_data.py``'s ``native-10000.jsonl``, ``pi-10000.jsonl``);
its ``message`` lines (all but a handful in those files) are decoded into the domain's attrs objects by:

* ``floor``: ``msgspec.json.decode`` of each line to plain dicts and lists (no domain objects at all);
* ``structs``: msgspec structs with the dialect's renames and tags (the typed half of ``wire/wire.py``), no objects;
* ``current``: ``Codec.decode_line`` as shipped (structs, a canonical re-encode compared with every line, converters
  that set attrs slots through ``object.__new__``);
* ``B: structs + attrs constructors``: the same structs, then plain constructor calls (attrs' ``__init__``, validators
  and all) written once per class;
* ``A: cattrs preconf msgspec``: ``cattrs.preconf.msgspec`` converter with the renames as ``override(rename=...)`` and
  the tagged unions as hooks, structuring the dicts msgspec decoded;
* ``C: msgspec attrs support``: decoding straight into the attrs classes: refused by msgspec (a union of several attrs
  classes is not supported, and it has no renames), so it has no row.

B and A are also checked: every object equals what ``current`` made, and (B) encoding the object back through the
structs gives the line's bytes again. Milliseconds per 1,000 lines, median of ``--repeat`` rounds, in one process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import attrs
import msgspec
from cattrs.gen import make_dict_structure_fn, override
from cattrs.preconf.msgspec import make_converter

from sessiontree.domain import messages as m
from sessiontree.domain.events import MessageAppended
from sessiontree.pi.pi import pi_codec
from sessiontree.wire.codec import native_codec
from sessiontree.wire.wire import WireDecoder

BLOCKS = (m.TextContent, m.ImageContent, m.ThinkingContent, m.ToolCall)
MESSAGES = (m.UserMessage, m.AssistantMessage, m.ToolResultMessage, m.CustomMessage, m.CompactionSummaryMessage,
            m.BranchSummaryMessage)


# ---- B: msgspec structs (the dialect's renames, tags, key order), then the attrs constructors ----

class StructsToDomain:
    """Struct -> attrs object by constructor calls; ``schema_of`` gives each class's wire field names."""

    def __init__(self, codec: Any) -> None:
        self.codec = codec
        self.wire = WireDecoder(codec.schemas, "chain" if codec.dialect.name == "native" else None)
        self.decode_struct = self.wire._decode  # the benchmark looks inside the shipped decoder: the structs only
        self.by_struct: dict[type, Callable[[Any], Any]] = {}
        for cls in (*BLOCKS, *MESSAGES, m.Usage, m.Cost):
            self.by_struct[self.wire._struct(cls)] = self._maker(cls)

    def _maker(self, cls: type) -> Callable[[Any], Any]:
        fields = self.codec.schemas[cls].fields
        names = [f.name for f in fields]
        nested = [f.name for f in fields if f.kind in ("value", "opt_value", "blocks", "content", "message", "messages")]
        convert, astuple, unset = self.value, msgspec.structs.astuple, msgspec.UNSET

        def make(s: Any) -> Any:
            kwargs = {n: v for n, v in zip(names, astuple(s)) if v is not unset}
            for n in nested:
                v = kwargs.get(n)
                if v is not None and v.__class__ is not str:
                    kwargs[n] = convert(v)
            return cls(**kwargs)

        return make

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return tuple(self.by_struct[x.__class__](x) if x.__class__ in self.by_struct else x for x in v)
        make = self.by_struct.get(v.__class__)
        return make(v) if make is not None else v

    def entry(self, line: bytes, sid: str, version: int) -> Any:
        s = self.decode_struct(line)
        return MessageAppended(originator_id=sid, originator_version=version, timestamp=s.timestamp, id=s.id,
                               parent_id=s.parent_id, message=self.by_struct[s.message.__class__](s.message))


class HandWritten(StructsToDomain):
    """B with one constructor call written out per class (what "defined once" would generate or spell out)."""

    def __init__(self, codec: Any) -> None:
        super().__init__(codec)
        s = self.wire._struct
        blocks: dict[type, Callable[[Any], Any]] = {
            s(m.TextContent): lambda b: m.TextContent(b.text),
            s(m.ThinkingContent): lambda b: m.ThinkingContent(b.thinking, signature=None if b.signature is msgspec.UNSET
                                                               else b.signature),
            s(m.ToolCall): lambda b: m.ToolCall(id=b.id, name=b.name, arguments=b.arguments),
        }
        unset = msgspec.UNSET

        def content(v: Any) -> Any:
            return v if v.__class__ is str else tuple([blocks[b.__class__](b) for b in v])

        def usage(u: Any) -> Any:
            c = u.cost
            return m.Usage(input=u.input, output=u.output, cache_read=u.cache_read, cache_write=u.cache_write,
                           total_tokens=u.total_tokens, cost=m.Cost(input=c.input, output=c.output,
                                                                    cache_read=c.cache_read, cache_write=c.cache_write,
                                                                    total=c.total))

        self.messages: dict[type, Callable[[Any], Any]] = {
            s(m.UserMessage): lambda x: m.UserMessage(content(x.content), timestamp=x.timestamp),
            s(m.AssistantMessage): lambda x: m.AssistantMessage(
                content(x.content), provider=x.provider, model=x.model, api=None if x.api is unset else x.api,
                usage=None if x.usage in (None, unset) else usage(x.usage), stop_reason=x.stop_reason,
                timestamp=x.timestamp),
            s(m.ToolResultMessage): lambda x: m.ToolResultMessage(
                tool_call_id=x.tool_call_id, tool_name=x.tool_name, content=content(x.content), is_error=x.is_error,
                details=None if x.details is unset else x.details, timestamp=x.timestamp),
        }

    def entry(self, line: bytes, sid: str, version: int) -> Any:
        s = self.decode_struct(line)
        return MessageAppended(originator_id=sid, originator_version=version, timestamp=s.timestamp, id=s.id,
                               parent_id=s.parent_id, message=self.messages[s.message.__class__](s.message))


# ---- A: cattrs' msgspec preconf converter ----

def cattrs_converter(codec: Any) -> Callable[[bytes, str, int], Any]:
    conv = make_converter()
    schemas = codec.schemas
    parent_key = codec.dialect.parent_key
    tags = {schemas[c].tag: c for c in MESSAGES}
    block_tags = {schemas[c].tag: c for c in BLOCKS}

    def block(v: Any, _: Any) -> Any:
        return conv.structure(v, block_tags[v["type"]])

    def blocks(v: Any, _: Any) -> Any:
        return tuple(conv.structure(b, block_tags[b["type"]]) for b in v)

    def content(v: Any, _: Any) -> Any:
        return v if isinstance(v, str) else blocks(v, None)

    def message(v: Any, _: Any) -> Any:
        return conv.structure(v, tags[v["role"]])

    for hooked, hook in ((m.Content, block), (tuple[m.Content, ...], blocks), (str | tuple[m.Content, ...], content),
                         (m.Message, message)):
        conv.register_structure_hook_func(lambda t, hooked=hooked: t == hooked, hook)
    for cls in (*BLOCKS, m.Cost, m.Usage, *MESSAGES):  # a nested class first: cattrs binds its hook when generating
        renames = {f.name: override(rename=f.wire) for f in schemas[cls].fields}
        conv.register_structure_hook(cls, make_dict_structure_fn(cls, conv, extra=override(omit=True), **renames))
    conv.register_structure_hook(MessageAppended, make_dict_structure_fn(
        MessageAppended, conv, extra=override(omit=True), parent_id=override(rename=parent_key)))
    decode = msgspec.json.decode

    def entry(line: bytes, sid: str, version: int) -> Any:
        d = decode(line)
        d["originator_id"], d["originator_version"] = sid, version
        return conv.structure(d, MessageAppended)

    return entry


def rounds(run: Callable[[], Any], repeat: int) -> float:
    """The median CPU time of ``run`` (what it made is dropped between rounds; the collector runs as in an app)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        run()
        times.append(time.process_time() - start)
    return statistics.median(times)


def off(run: Callable[[], Any], repeat: int) -> float:
    """:func:`rounds` with attrs' validators switched off: an estimate of a domain whose field validators move to the
    append command (the switch is attrs' global one, fine in a benchmark, never in the library)."""
    with attrs.validators.disabled():
        return rounds(run, repeat)


def measure(path: Path, repeat: int) -> None:
    lines = path.read_bytes().split(b"\n")
    codec = pi_codec() if b'"parentId"' in lines[1] else native_codec()
    sid = "s"
    picked = [(line, v) for v, line in enumerate(lines, 1) if v > 1 and line.startswith(b'{"type":"message"')]
    per = 1000 / len(picked)
    b, hand = StructsToDomain(codec), HandWritten(codec)
    a = cattrs_converter(codec)
    current = codec.decode_line
    expected = [current(line, sid, v) for line, v in picked]
    made_b = [b.entry(line, sid, v) for line, v in picked]
    made_a = [a(line, sid, v) for line, v in picked]
    same_b = sum(x == y for x, y in zip(made_b, expected))
    same_a = sum(x == y for x, y in zip(made_a, expected))
    same_hand = sum(hand.entry(line, sid, v) == y for (line, v), y in zip(picked, expected))
    encode = msgspec.json.encode
    identical = sum(encode(b.decode_struct(line)) == line for line, _v in picked)  # the structs' own re-encode
    unlike = next((line for line, _v in picked if encode(b.decode_struct(line)) != line), None)
    differ = next(((x, y) for x, y in zip(made_a, expected) if x != y), None)
    del expected, made_a, made_b
    plain = msgspec.json.decode
    rows = {
        "floor: msgspec to dicts": rounds(lambda: [plain(line) for line, _v in picked], repeat),
        "structs only": rounds(lambda: [b.decode_struct(line) for line, _v in picked], repeat),
        "current: Codec.decode_line": rounds(lambda: [current(line, sid, v) for line, v in picked], repeat),
        "B: structs + attrs constructors": rounds(lambda: [b.entry(line, sid, v) for line, v in picked], repeat),
        "B, a constructor call written out per class": rounds(lambda: [hand.entry(line, sid, v) for line, v in picked],
                                                              repeat),
        "the same, attrs validators off (checks left to the append command)": off(
            lambda: [hand.entry(line, sid, v) for line, v in picked], repeat),
        "A: cattrs preconf msgspec": rounds(lambda: [a(line, sid, v) for line, v in picked], repeat),
    }
    print(f"\n{path.name} ({codec.dialect.name}): {len(picked):,} message lines; equal to current: B {same_b:,}, "
          f"B written out {same_hand:,}, A {same_a:,}; struct re-encode byte-identical: {identical:,}")
    print("| option | ms per 1,000 lines |\n|---|---:|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds * 1000 * per:.2f} |")
    if unlike is not None:
        print(f"not byte-identical, e.g.: {unlike!r:.300}\n  encoded: {encode(b.decode_struct(unlike))!r:.300}")
    if differ is not None:
        print(f"A differs, e.g.: {differ[0]!r:.600}\n  against {differ[1]!r:.600}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"cattrs {version('cattrs')}, attrs {version('attrs')}, msgspec {version('msgspec')}")
    for path in args.files:
        measure(path, args.repeat)


if __name__ == "__main__":
    main(sys.argv[1:])
