"""The resource policy every loader applies to untrusted input.

Canaries and traces travel between teams, so limits are enforced before work that
scales with the input: file size, decompressed size, JSON document size and nesting
depth, events, ranks, occurrences after expansion, message bytes and time values.
Defaults suit a 24 GiB laptop (docs/limits.md lists them and what each bounds);
``TRACECANARY_LIMITS="name=value,..."`` raises (or lowers) them, e.g.
``TRACECANARY_LIMITS=max_occurrences=1e9,max_ranks=131072``.

Guarantees: every refusal is a ``ResourceLimitExceeded`` (exit 2) naming the file, the
limit and, where one value broke it, the field; nothing here reads more than the limit
(a gzip bomb stops at ``max_decompressed_bytes`` in memory bounded by the chunk size, a
JSON document is refused before parsing once it is over ``max_json_document_bytes``);
a corrupt gzip stream, invalid UTF-8, NaN/Infinity (not JSON) and nesting deeper than
``max_depth`` are refused as ``InputError`` without a traceback. ``parse_json_bytes``
also refuses a key repeated within one object and a lone surrogate (``"\\ud800"``,
not writable as UTF-8), naming record and field. ``load_yaml`` is the package's one
YAML reader: file size, alias count, expanded node count and depth are bounded before
anything is built (a "billion laughs" document is exit 2 in milliseconds); the text is
parsed by libyaml, PyYAML's C parser (``CSafeLoader``'s), where PyYAML has it.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import io
import itertools
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tracecanary.errors import InputError, ResourceLimitExceeded, not_a_file_reason

if TYPE_CHECKING:  # PyYAML is imported where YAML is read
    import yaml

READ_CHUNK_BYTES = 1 << 20


# The most a limit may be raised to: what a Program can hold. Occurrence indexes and
# ranks are its int32 member columns (``program.MEMBER_INDEX_LIMIT``; a test checks the
# two agree), so a world or an expansion past 2**31 could only fail later, or exhaust
# memory on the way (a world's per-rank tables are sized by its world_size).
CEILINGS: dict[str, int] = {"max_ranks": 1 << 31, "max_occurrences": 1 << 31}


@dataclass(frozen=True)
class Limits:
    """Resource limits (see docs/limits.md). Units are in the names."""

    max_file_bytes: int = 4 << 30  # one input file as stored (compressed or not)
    max_decompressed_bytes: int = 16 << 30  # bytes read out of one (gzip) file
    max_json_document_bytes: int = 2 << 30  # one JSON document parsed whole
    max_events: int = 200_000_000  # per-rank events of one trace
    max_depth: int = 64  # JSON nesting depth
    max_ranks: int = 65_536  # world size, and members of one group
    max_occurrences: int = 100_000_000  # logical occurrences a canary expands to
    max_message_bytes: int = 1 << 40  # bytes of one collective / message
    max_time_ns: int = 1 << 62  # any timestamp, gap, latency or duration (ns)
    max_yaml_bytes: int = 16 << 20  # one YAML file (configs, backends, tolerances)
    max_yaml_aliases: int = 1_000  # alias references (*name) in one YAML file
    max_yaml_nodes: int = 1_000_000  # YAML nodes with every alias expanded
    max_archive_members: int = 100_000  # members of one campaign archive

    def with_overrides(self, spec: str | None) -> Limits:
        """These limits with ``name=value,...`` applied (values may be written 1e9)."""
        if not spec:
            return self
        changes: dict[str, int] = {}
        known = {f.name for f in dataclasses.fields(self)}
        for item in spec.split(","):
            if not item.strip():
                continue
            name, _, value = item.partition("=")
            name = name.strip()
            if name not in known:
                raise InputError(
                    f"unknown resource limit {name!r} (known: {', '.join(sorted(known))})",
                    field="TRACECANARY_LIMITS",
                )
            try:
                number = float(value) if any(c in value for c in ".eE") else int(value)
                if number != number or number in (float("inf"), float("-inf")):
                    raise ValueError
                changes[name] = int(number)
            except ValueError:
                raise InputError(
                    f"limit {name} needs a number, got {value.strip()!r}",
                    field="TRACECANARY_LIMITS",
                ) from None
            if changes[name] < 1:
                raise InputError(f"limit {name} must be >= 1", field="TRACECANARY_LIMITS")
            if name in CEILINGS and changes[name] > CEILINGS[name]:
                raise InputError(
                    f"limit {name} can be at most {CEILINGS[name]} (ranks and occurrences "
                    "are stored as 32-bit integers)",
                    field="TRACECANARY_LIMITS",
                )
        return dataclasses.replace(self, **changes)

    def check(
        self,
        name: str,
        value: int,
        *,
        what: str | None = None,
        file: str | os.PathLike | None = None,
        record: int | str | None = None,
        field: str | None = None,
    ) -> int:
        """``value`` if it is within limit ``name``, else ResourceLimitExceeded naming it."""
        limit = getattr(self, name)
        if value > limit:
            raise ResourceLimitExceeded(
                f"{what or field or name} is {value}, over {name}={limit} "
                "(raise it with TRACECANARY_LIMITS)",
                file=None if file is None else str(file),
                record=record,
                field=field,
            )
        return value


def current_limits() -> Limits:
    """The defaults with ``TRACECANARY_LIMITS`` applied."""
    return Limits().with_overrides(os.environ.get("TRACECANARY_LIMITS"))


_GZIP_ERRORS = (gzip.BadGzipFile, zlib.error, EOFError)


class _BoundedReader(io.RawIOBase):
    """A reader that raises once more than ``limit`` bytes have been read through it,
    and turns a corrupt gzip stream into an InputError."""

    def __init__(self, raw: BinaryIO, limit: int, path: str, owned: BinaryIO | None = None) -> None:
        self.raw, self.limit, self.path, self.count = raw, limit, path, 0
        self.owned = owned

    def close(self) -> None:
        if not self.closed:
            try:
                self.raw.close()
            finally:
                if self.owned is not None and self.owned is not self.raw:
                    self.owned.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = min(len(buffer), self.limit - self.count + 1, READ_CHUNK_BYTES)
        try:  # straight into the caller's buffer: no intermediate bytes object
            n = self.raw.readinto(memoryview(buffer)[: max(want, 1)]) or 0
        except _GZIP_ERRORS as err:
            raise InputError(f"corrupt gzip stream: {err}", file=self.path) from None
        self.count += n
        if self.count > self.limit:
            raise ResourceLimitExceeded(
                f"decompressed size exceeds max_decompressed_bytes={self.limit}", file=self.path
            )
        return n


class _DigestingReader(io.RawIOBase):
    """Reads ``raw`` through, feeding every byte read to ``digest.update`` in order."""

    def __init__(self, raw: BinaryIO, digest: Any) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.raw.readinto(buffer) or 0
        if n:
            self.digest.update(memoryview(buffer)[:n])
        return n


def open_input(
    path: str | os.PathLike, limits: Limits | None = None, *, digest: Any = None
) -> BinaryIO:
    """Open a regular, possibly gzip-compressed file for reading, enforcing the size
    limits lazily (a gzip bomb stops at the limit, in bounded memory).

    ``digest`` (optional, e.g. ``hashlib.sha256()``): every byte of the file as stored
    (compressed, for gzip) is passed to ``digest.update`` in file order as it is read,
    each byte once; once the returned stream has been read to its end, ``digest``
    covers the whole file, so the caller need not read it a second time to hash it."""
    limits = limits or current_limits()
    p = Path(path)
    if not p.is_file():
        raise InputError(not_a_file_reason(p), file=str(path))
    size = p.stat().st_size
    if size > limits.max_file_bytes:
        raise ResourceLimitExceeded(
            f"file is {size} bytes, over max_file_bytes={limits.max_file_bytes}", file=str(path)
        )
    try:
        raw = open(p, "rb")
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    head = raw.read(2)
    raw.seek(0)
    stored: BinaryIO = raw if digest is None else _DigestingReader(raw, digest)  # type: ignore[assignment]
    stream: BinaryIO = gzip.GzipFile(fileobj=stored) if head == b"\x1f\x8b" else stored  # type: ignore[assignment]
    return io.BufferedReader(
        _BoundedReader(stream, limits.max_decompressed_bytes, str(path), owned=raw)
    )


def read_limited(stream: BinaryIO, cap: int, *, what: str, limit_name: str, file: str) -> bytes:
    """Everything left in ``stream``, refused once it is over ``cap`` bytes. Reads in
    chunks: memory is what was read, never a buffer of the cap's size."""
    chunks = []
    total = 0
    while chunk := stream.read(READ_CHUNK_BYTES):
        total += len(chunk)
        if total > cap:
            raise ResourceLimitExceeded(f"{what} is over {limit_name}={cap}", file=file)
        chunks.append(chunk)
    return b"".join(chunks)


def read_input(path: str | os.PathLike, limits: Limits | None = None) -> bytes:
    """The (decompressed) bytes of a whole file under the policy: max_file_bytes,
    max_decompressed_bytes and max_json_document_bytes (a text input read whole)."""
    limits = limits or current_limits()
    with open_input(path, limits) as stream:
        return read_limited(
            stream,
            limits.max_json_document_bytes,
            what="document",
            limit_name="max_json_document_bytes",
            file=str(path),
        )


def check_text_depth(
    text: bytes | str, max_depth: int, *, file: str, record: int | str | None = None
) -> None:
    """Refuse a JSON text nested deeper than ``max_depth`` before it is parsed (a few
    vectorized passes over its bytes, see ``tracecanary.json_depth``)."""
    from tracecanary.json_depth import max_nesting_depth

    if max_nesting_depth(text) > max_depth:
        raise ResourceLimitExceeded(
            f"JSON nesting deeper than max_depth={max_depth}", file=file, record=record
        )


_NUMBER_TYPES = {int, float}
_CONTAINER_TYPES = {list, dict}


def _out_of_range(values: list, bound: int) -> Any:
    """The first number of a list of plain numbers beyond +-bound, else None."""
    lo, hi = min(values), max(values)
    if lo >= -bound and hi <= bound:
        return None
    return next(v for v in values if not -bound <= v <= bound)


def check_number_range(doc: Any, bound: int, *, limit_name: str, file: str | None) -> None:
    """Refuse a document holding a number beyond ``+-bound`` (ResourceLimitExceeded naming
    its path), so converting any of its numbers to int64 cannot wrap. JSON Schema calls
    1e308 an integer; this is where such a value stops. Lists of numbers (and of number
    vectors) are checked with C-level min/max, not item by item."""

    def where(entry) -> str:
        keys = []
        while entry is not None:
            entry, key = entry
            keys.append(f"[{key}]" if isinstance(key, int) else f".{key}")
        return "(document)" + "".join(reversed(keys))

    def refuse(value, entry):
        raise ResourceLimitExceeded(
            f"number {value:.6g} is beyond +-{limit_name}={bound}", file=file, field=where(entry)
        )

    stack: list[tuple[Any, Any]] = [(doc, None)]
    while stack:
        node, entry = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, (entry, k)) for k, v in node.items())
        elif isinstance(node, list):
            types = set(map(type, node))
            if types == {list}:  # vectors: check them flattened, locate only on failure
                flat = list(itertools.chain.from_iterable(node))
                if set(map(type, flat)) <= _NUMBER_TYPES:
                    if flat and _out_of_range(flat, bound) is not None:
                        stack.extend((v, (entry, i)) for i, v in enumerate(node))
                    continue
            numbers = (
                node if types <= _NUMBER_TYPES else [x for x in node if type(x) in _NUMBER_TYPES]
            )
            if numbers:
                bad = _out_of_range(numbers, bound)
                if bad is not None:
                    refuse(bad, (entry, next(i for i, v in enumerate(node) if v is bad)))
            if types & _CONTAINER_TYPES:
                stack.extend(
                    (v, (entry, i)) for i, v in enumerate(node) if type(v) in _CONTAINER_TYPES
                )
        elif type(node) in _NUMBER_TYPES and not -bound <= node <= bound:
            refuse(node, entry)


def refuse_json_constant(name: str) -> Any:
    """``json.loads(parse_constant=...)``: NaN, Infinity and -Infinity are not JSON."""
    raise ValueError(f"{name} is not a JSON number")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads(object_pairs_hook=...)``: an object, refusing a repeated key (JSON
    leaves duplicates undefined; Python would keep the last one silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _DuplicateKey(key)
    return obj


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


# a \uD800-\uDFFF escape: the only way a JSON text that is valid UTF-8 can carry a
# surrogate code point (paired ones decode to one character; lone ones cannot be encoded)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89a-fA-F]")


def _json_path(keys: list) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")


def find_lone_surrogate(doc: Any) -> list | None:
    """The key path of the first string (key or value) of ``doc`` holding a lone
    surrogate (not encodable as UTF-8), else None. A Python walk: call it only when
    ``may_hold_lone_surrogate`` says the text has a surrogate escape."""
    stack: list[tuple[Any, list]] = [(doc, [])]
    while stack:
        node, keys = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return keys
        elif isinstance(node, dict):
            for k, v in node.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return [*keys, k.encode("utf-8", "backslashreplace").decode("ascii")]
                stack.append((v, [*keys, k]))
        elif isinstance(node, list):
            stack.extend((v, [*keys, i]) for i, v in reversed(list(enumerate(node))))
    return None


def may_hold_lone_surrogate(text: bytes | str) -> bool:
    """Whether a JSON text has a surrogate escape at all (a C-level scan: a text with no
    backslash, the common case, costs one ``memchr``)."""
    if isinstance(text, str):
        return "\\" in text and _SURROGATE_ESCAPE_TEXT.search(text) is not None
    return b"\\" in text and _SURROGATE_ESCAPE.search(text) is not None


def refuse_lone_surrogates(
    text: bytes | str, doc: Any, *, file: str, record: int | str | None = None
) -> None:
    """InputError naming the record and field of the first lone surrogate in ``doc`` (the
    parse of ``text``): such a string cannot be written as UTF-8 (Parquet, canonical
    JSON). The items of a document's top-level ``events`` list are its records."""
    if not may_hold_lone_surrogate(text):
        return
    keys = find_lone_surrogate(doc)
    if keys is None:
        return
    if record is None and len(keys) >= 2 and keys[0] == "events" and isinstance(keys[1], int):
        record, keys = keys[1], keys[2:]
    raise InputError(
        "string holds a lone surrogate (\\ud800-\\udfff), not encodable as UTF-8",
        file=file,
        record=record,
        field=_json_path(keys) or "(document)",
    )


def parse_json_bytes(
    data: bytes | str, *, file: str, limits: Limits | None = None, record: int | str | None = None
) -> Any:
    """Parse one JSON text under the policy: NaN/Infinity, invalid UTF-8, syntax
    errors, a key repeated within one object and a lone surrogate (``"\\ud800"``) are
    InputError; nesting deeper than ``max_depth`` is ResourceLimitExceeded."""
    limits = limits or current_limits()
    check_text_depth(data, limits.max_depth, file=file, record=record)
    try:
        doc = json.loads(
            data, parse_constant=refuse_json_constant, object_pairs_hook=_unique_object
        )
    except RecursionError:
        raise ResourceLimitExceeded(
            f"JSON nesting deeper than max_depth={limits.max_depth}", file=file, record=record
        ) from None
    except json.JSONDecodeError as err:
        raise InputError(
            f"not valid JSON (line {err.lineno} column {err.colno}): {err.msg}",
            file=file,
            record=record,
        ) from None
    except UnicodeDecodeError as err:
        raise InputError(
            f"not valid JSON (bad UTF-8 at byte {err.start})", file=file, record=record
        ) from None
    except _DuplicateKey as err:
        raise InputError(
            "key repeated within one JSON object", file=file, record=record, field=err.key[:200]
        ) from None
    except ValueError as err:  # NaN / Infinity, or an integer too long to convert
        raise InputError(f"not valid JSON: {err}", file=file, record=record) from None
    refuse_lone_surrogates(data, doc, file=file, record=record)
    return doc


def load_json(path: str | os.PathLike, limits: Limits | None = None) -> Any:
    """Parse a JSON document (optionally gzip) under the resource policy; exit-2 errors
    name the file and the position of a syntax error."""
    limits = limits or current_limits()
    return parse_json_bytes(read_input(path, limits), file=str(path), limits=limits)


@functools.cache
def _bounded_yaml_loader() -> type:
    """The YAML loader class of the policy (PyYAML imported on first use: a command that
    reads no YAML does not pay for it).

    The text is scanned and parsed by libyaml (``CParser``, the parser of PyYAML's
    ``CSafeLoader``; PyYAML's pure-Python reader, scanner and parser where PyYAML was built
    without libyaml), and resolved and constructed as ``CSafeLoader`` does
    (``SafeConstructor``, ``Resolver``). The nodes are composed by PyYAML's Python
    ``Composer``, not by CSafeLoader's C composer: the C one recurses once per nesting
    level with no bound (a 100,000-deep ``[[[...]]]`` overflows the C stack), where this
    one counts depth and aliases before it recurses, to the same nodes."""
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    if yaml.__with_libyaml__:
        from yaml.cyaml import CParser

        parser_bases: tuple[type, ...] = (CParser,)

        def start_parser(loader: Any, stream: str) -> None:
            CParser.__init__(loader, stream)

    else:
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        parser_bases = (Reader, Scanner, Parser)

        def start_parser(loader: Any, stream: str) -> None:
            Reader.__init__(loader, stream)
            Scanner.__init__(loader)
            Parser.__init__(loader)

    class _BoundedYamlLoader(Composer, *parser_bases, SafeConstructor, Resolver):
        """A safe loader under the resource policy: refuses more than ``max_yaml_aliases``
        alias references, nesting deeper than ``max_depth`` (while composing, before any
        recursion), more than ``max_yaml_nodes`` nodes once aliases are expanded (a
        "billion laughs" document is a few KB whose expansion is exponential), recursive
        aliases, and a key repeated within one mapping. SafeConstructor already refuses
        every tag that would construct a Python object."""

        def __init__(self, stream: str, limits: Limits, file: str) -> None:
            start_parser(self, stream)  # the reader refuses control characters
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self.limits, self.file = limits, file
            self.aliases = 0
            self.depth = 0

        def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                self.limits.check(
                    "max_yaml_aliases", self.aliases, what="YAML alias references", file=self.file
                )
            self.depth += 1
            try:
                if self.depth > self.limits.max_depth:
                    raise ResourceLimitExceeded(
                        f"YAML nesting deeper than max_depth={self.limits.max_depth}",
                        file=self.file,
                    )
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)
                seen: set = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=deep)
                    try:
                        repeated = key in seen
                    except TypeError:  # an unhashable key: SafeLoader refuses it below
                        continue
                    if repeated:
                        raise InputError(
                            f"duplicate key {key!r} (line {key_node.start_mark.line + 1})",
                            file=self.file,
                            field=str(key)[:200],
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return _BoundedYamlLoader


def _expanded_nodes(root: yaml.Node, limits: Limits, file: str) -> int:
    """Nodes of ``root`` with every alias expanded (each distinct node sized once, so
    this is linear in the composed graph); refuses a recursive alias and a total over
    ``max_yaml_nodes`` as soon as it is reached."""
    import yaml

    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if children_done:
            in_progress.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            limits.check(
                "max_yaml_nodes", sizes[key], what="YAML nodes (aliases expanded)", file=file
            )
            continue
        if key in in_progress:
            raise InputError("recursive YAML alias (a node that contains itself)", file=file)
        in_progress.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in in_progress:
                raise InputError("recursive YAML alias (a node that contains itself)", file=file)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def parse_yaml_text(text: str, *, file: str, limits: Limits | None = None) -> Any:
    """Parse one YAML text under the policy (see ``_bounded_yaml_loader``); every refusal
    is exit 2 naming ``file`` and, for a syntax error, the line."""
    import yaml

    limits = limits or current_limits()

    loader = None
    try:
        loader = _bounded_yaml_loader()(text, limits, file)  # the reader refuses control bytes
        root = loader.get_single_node()
        if root is None:
            return None
        _expanded_nodes(root, limits, file)
        return loader.construct_document(root)
    except RecursionError:
        raise ResourceLimitExceeded(
            f"YAML nesting deeper than max_depth={limits.max_depth}", file=file
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        if context:  # "found duplicate anchor 'x'; first occurrence" + "second occurrence"
            context_mark = getattr(err, "context_mark", None)
            at = f" (line {context_mark.line + 1})" if context_mark is not None else ""
            problem = f"{context}{at}, {problem}"
        raise InputError(
            f"not valid YAML{where}: {problem}".replace("\n", " "), file=file
        ) from None
    except ValueError as err:  # e.g. an integer of more than 4,300 digits
        raise InputError(f"not valid YAML: {err}"[:300], file=file) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(path: str | os.PathLike, limits: Limits | None = None) -> Any:
    """The one YAML reader of the package: a regular file of at most ``max_yaml_bytes``,
    strict UTF-8, parsed by ``parse_yaml_text``. Bounded in time and memory: a 4 KB
    "billion laughs" document is refused after composing a few hundred nodes."""
    limits = limits or current_limits()
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        raise InputError("no such file", file=str(path)) from None
    if not p.is_file():
        raise InputError(not_a_file_reason(p), file=str(path))
    limits.check("max_yaml_bytes", st.st_size, what="YAML file size", file=path)
    try:
        with open(p, "rb") as fh:
            data = fh.read(limits.max_yaml_bytes + 1)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", file=str(path)) from None
    limits.check("max_yaml_bytes", len(data), what="YAML file size", file=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (bad byte at {err.start})", file=str(path)) from None
    return parse_yaml_text(text, file=str(path), limits=limits)
