"""What a notebook's own demo code prints or draws, in another language (docs/TRANSLATING.md, "Printed").

The English notebook stays plain code: ``print(f"d_k = {width}: variance of q.k = {v:.2f}")``,
``plot_curves(..., title="Unscaled scores saturate softmax")``. An edition's build replaces those
string literals, and only those, with their translation, read from the chapter's catalog
(``i18n/<lang>/<chapter>.po``, msgctxt ``<cell id>:code``, msgid the English template as
:func:`instructor.messages._template` writes an f-string: ``d_k = {width}: variance of q.k = {v:.2f}``).

* **Which cells**: the demo cells, code cells without nbgrader metadata (:func:`is_demo`). A graded,
  solution or locked cell is never touched: its code is the English one, byte for byte.
* **Which strings** (:func:`shown`): what the code shows, found with ``ast`` (and :func:`_labels`: a
  loop's own labels, an ``assert``'s message, a ``MY_...`` answer): the arguments of ``print``, the
  ``title``/``xlabel``/``ylabel``/``label`` arguments of any call, the text of ``ax.text`` and of
  ``set_title``/``set_xlabel``/``set_ylabel``/``set_label``/``suptitle``, the string arguments of
  the course's plotting helpers (``plot_*``, ``show_*``) and the keys of a dict literal passed to
  one (a curve's legend), and the string parts of such an argument (``a + f"..."``, ``x if c else
  "..."``), and the words of a column header written in a placeholder (``{'time ratio':34}``, its width
  kept: :data:`HEADER`). A string that only formats (no word of two letters) is left as it is. Every other
  string (a dict key the code looks up, a token, a mode such as ``"relu"``) is code and stays.
* **Labels** (:func:`find_labels`): a string a demo cell shows and also keeps in a name other cells read,
  or looks up (chapter 10's ``ladder = {"counted bigram": ...}``), is one message per notebook (msgctxt
  ``<notebook>:label``), renamed at every occurrence in the demo cells at once; :func:`label_problems`
  refuses a renaming that could change what the code does (a graded cell or ``course/`` writes it too, two
  labels meet, the code computes with it).
* **What a translation may change**: the words. It keeps every ``{placeholder}`` of the English,
  conversion and format included (the numbers print the same), and every number written in the
  text (``1/8``, ``ln 12``): :func:`problems` refuses anything else, and so does ``translate
  --check``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import Counter
from pathlib import Path

from course.language import PLACEHOLDER

CONTEXT = ":code"
"""A printed string's msgctxt is its cell's id and this suffix: ``a1b2c3d4:code``."""
SHOWN_KEYWORDS = {"title", "xlabel", "ylabel", "label", "suptitle"}
SHOWN_METHODS = {"set_title", "set_xlabel", "set_ylabel", "set_label", "suptitle", "title", "xlabel", "ylabel"}
HELPERS = ("plot_", "show_")  # the course's plotting helpers (course/plots.py, a chapter's show_mask)
WORDS = re.compile(r"[^\W\d_]{2}")  # two letters in a row (any script)
NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _template(node: ast.AST) -> str | None:
    from instructor.messages import _template  # messages imports translate, which imports this module

    return _template(node)


def is_demo(cell) -> bool:
    """A code cell nbgrader knows nothing of: not graded, no solution, not locked."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and not any(meta.get(k) for k in ("grade", "solution", "locked", "task"))


def _name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _parts(node: ast.AST):
    """The string nodes an argument is made of: itself, the operands of ``+``, the branches of ``if``."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        yield node
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _parts(node.left)
        yield from _parts(node.right)
    elif isinstance(node, ast.IfExp):
        yield from _parts(node.body)
        yield from _parts(node.orelse)
    elif isinstance(node, ast.Call) and _name(node.func) == "join" and len(node.args) == 1 \
            and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):  # "".join(f"{key:>9s}" for key in ...)
        yield from _parts(node.args[0].elt)


def _string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _shown_args(call: ast.Call):
    """The arguments of a call that are shown whole (a ``print``'s, a helper's, a title's, ``ax.text``'s text)."""
    name = _name(call.func)
    if name == "print" or name.startswith(HELPERS):
        yield from call.args
    elif isinstance(call.func, ast.Attribute) and name in SHOWN_METHODS:
        yield from call.args[:1]
    elif isinstance(call.func, ast.Attribute) and name == "text":  # ax.text(x, y, s)
        yield from call.args[2:3]
    yield from (keyword.value for keyword in call.keywords if keyword.arg in SHOWN_KEYWORDS)


def _names_of(nodes) -> set[int]:
    """The ``Name`` nodes these shown nodes show: a name itself, or a ``{name}`` of an f-string."""
    out = set()
    for part in nodes:
        if isinstance(part, ast.Name):
            out.add(id(part))
        elif isinstance(part, ast.JoinedStr):
            out.update(id(v.value) for v in part.values if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name))
    return out


def _shown_exprs(tree: ast.AST):
    for call in ast.walk(tree):
        if isinstance(call, ast.Call):
            for arg in _shown_args(call):
                yield arg
                yield from _parts(arg)


def _bound(target: ast.AST, value: ast.AST):
    """(target name, string node) for each string a loop or assignment binds to a plain name."""
    if isinstance(target, ast.Name) and _string(value):
        yield target.id, value
    elif isinstance(target, ast.Tuple) and isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
        for sub, item in zip(target.elts, value.elts, strict=True):
            yield from _bound(sub, item)


def _iterated(target: ast.AST, iterable: ast.AST):
    """What ``for target in iterable`` binds from literals written in the loop: a list or tuple of
    them, ``zip`` of such lists, ``enumerate`` of one."""
    if isinstance(iterable, (ast.Tuple, ast.List)):
        for item in iterable.elts:
            yield from _bound(target, item)
    elif isinstance(iterable, ast.Call) and not iterable.keywords and isinstance(target, ast.Tuple):
        name = _name(iterable.func)
        if name == "zip" and len(iterable.args) == len(target.elts):
            for sub, arg in zip(target.elts, iterable.args, strict=True):
                yield from _iterated(sub, arg)
        elif name == "enumerate" and len(iterable.args) == 1 and len(target.elts) == 2:
            yield from _iterated(target.elts[1], iterable.args[0])


def _uses(nodes) -> dict[str, list[ast.Name]]:
    out: dict[str, list[ast.Name]] = {}
    for node in nodes:
        for name in ast.walk(node):
            if isinstance(name, ast.Name):
                out.setdefault(name.id, []).append(name)
    return out


def _only_shown(uses: list[ast.Name], shown: set[int], stores: bool = False) -> bool:
    """Read at least once, and every read shown (``stores``: its assignments allowed too)."""
    reads = [use for use in uses if not isinstance(use.ctx, ast.Store)]
    return bool(reads) and len(reads if stores else uses) == len(reads) and all(id(use) in shown for use in reads)


def _labels(tree: ast.AST):
    """Strings shown otherwise than as a call's argument: a literal a loop (``for``, or a comprehension)
    binds to a name that its body only shows (``for name, n in [("causal", 1), ...]:
    print(f"{name:9s} {n}")``); the text a loop's body assigns (``=``, ``+=``) to a name the cell only
    shows (``said = f"{what}: ..."; ...; print(said)``); the message of an ``assert`` or of
    ``check_true``; and the text assigned to a ``MY_...`` name (the student's own answer, which they
    overwrite)."""
    fixed = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            fixed += _parts(node.msg)
        elif isinstance(node, ast.Call) and _name(node.func) == "check_true":  # course.check_true(condition, message)
            fixed += (part for arg in node.args[1:2] for part in _parts(arg))
            fixed += (part for k in node.keywords if k.arg == "message" for part in _parts(k.value))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.startswith("MY_") and _string(node.value):
            fixed.append(node.value)
    loops = [(node.target, node.iter, node.body) for node in ast.walk(tree) if isinstance(node, ast.For)]
    loops += [(c.generators[0].target, c.generators[0].iter, [c.elt]) for c in ast.walk(tree)
              if isinstance(c, (ast.GeneratorExp, ast.ListComp)) and len(c.generators) == 1]
    assigned = [(node.targets[0] if isinstance(node, ast.Assign) else node.target, node.value)
                for target, _, body in loops if isinstance(target, (ast.Name, ast.Tuple)) for node in ast.walk(
                    ast.Module(body=[s for s in body if isinstance(s, ast.stmt)], type_ignores=[]))
                if (isinstance(node, ast.Assign) and len(node.targets) == 1) or
                (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add))]
    everywhere, parents = _uses([tree]), _parents(tree)
    base = _names_of(_shown_exprs(tree))
    shown, found = base, []
    for _ in range(4):  # a label reaches print through at most a few names
        found = []
        for target, iterable, body in loops:
            uses = _uses(body)
            found += [string for name, string in _iterated(target, iterable) if _only_shown(uses.get(name, []), shown)]
        for target, value in assigned:
            if isinstance(target, ast.Name) and _only_shown(everywhere.get(target.id, []), shown, stores=True):
                found += _parts(value)
        found += _table_rows(tree, everywhere, shown)
        found += _appended(parents, everywhere, loops, shown)
        names = base | _names_of(found)
        if names == shown:
            break
        shown = names
    yield from fixed
    yield from found


def _appended(parents: dict[int, ast.AST], everywhere: dict[str, list[ast.Name]], loops, shown: set[int]):
    """The texts appended to a list a cell builds only to show: a name the cell only assigns ``[]`` to, only
    ``.append``s one value to, and only iterates with loops whose own name is only shown (``cells = []``;
    ``cells.append(f"{share:6.1%} of {n}" if n else "no couplet")``; ``print("".join(f"{c:>29s}" for c in cells))``)."""
    for uses in everywhere.values():
        appended, ok = [], True
        for use in uses:
            parent = parents.get(id(use))
            if isinstance(use.ctx, ast.Store):
                ok &= isinstance(parent, ast.Assign) and len(parent.targets) == 1 \
                    and isinstance(parent.value, ast.List) and not parent.value.elts
            elif isinstance(parent, ast.Attribute) and parent.attr == "append":
                call = parents.get(id(parent))
                ok &= isinstance(call, ast.Call) and call.func is parent and len(call.args) == 1 and not call.keywords
                if ok:
                    appended.append(call.args[0])
            else:  # read: only as the iterable of a loop whose name it binds is only shown
                loop = [(target, body) for target, iterable, body in loops if iterable is use]
                ok &= bool(loop) and isinstance(loop[0][0], ast.Name) \
                    and _only_shown(_uses(loop[0][1]).get(loop[0][0].id, []), shown)
            if not ok:
                break
        if ok and appended:
            yield from (part for value in appended for part in _parts(value))


def _table_rows(tree: ast.AST, everywhere: dict[str, list[ast.Name]], shown: set[int]):
    """The labels of a table a cell builds and prints: a name the cell only assigns lists of tuples to (``=``,
    ``+=``, a literal or a comprehension) and only iterates, ``for label, measured, expected in rows:``; the
    tuples' items in the places of the loop's names that its body only shows."""
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and isinstance(node.iter, ast.Name)
             and isinstance(node.target, ast.Tuple) and all(isinstance(e, ast.Name) for e in node.target.elts)]
    for loop in loops:
        table, width = loop.iter.id, len(loop.target.elts)
        stores = [node for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AugAssign))
                  and table in [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                                if isinstance(t, ast.Name)]]
        reads = [use for use in everywhere.get(table, []) if not isinstance(use.ctx, ast.Store)]
        rows = [elt for node in stores for elt in (node.value.elts if isinstance(node.value, ast.List) else
                                                   [node.value.elt] if isinstance(node.value, ast.ListComp) else [None])]
        single = all(len(node.targets) == 1 if isinstance(node, ast.Assign) else isinstance(node.op, ast.Add)
                     for node in stores)
        if any(read is not loop.iter for read in reads) or not single \
                or not all(isinstance(row, ast.Tuple) and len(row.elts) == width for row in rows):
            continue
        uses = _uses(loop.body)
        for at, name in enumerate(loop.target.elts):
            if _only_shown(uses.get(name.id, []), shown):
                yield from (part for row in rows for part in _parts(row.elts[at]))


def _shown_nodes(tree: ast.AST):
    yield from _labels(tree)
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = _name(call.func)
        helper = name.startswith(HELPERS)
        if name == "print" or helper or (name in SHOWN_METHODS and isinstance(call.func, ast.Attribute)) \
                or (name == "text" and isinstance(call.func, ast.Attribute)):
            args = call.args if name == "print" or helper else call.args[2:3] if name == "text" else call.args[:1]
            for arg in args:
                yield from _parts(arg)
                if helper and isinstance(arg, ast.Dict):  # a dict of curves: its keys are the legend
                    for key in arg.keys:
                        yield from _parts(key) if key is not None else ()
        for keyword in call.keywords:
            if keyword.arg in SHOWN_KEYWORDS:
                yield from _parts(keyword.value)
            elif helper and isinstance(keyword.value, ast.Dict):  # plot_curves(..., hlines={"uniform": ...})
                for key in keyword.value.keys:
                    yield from _parts(key) if key is not None else ()


def _code(source: str) -> str:
    """``source`` as Python: IPython's ``%magic`` and ``!shell`` lines blanked (the lines keep their numbers)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def shown(source: str, labels=()) -> list[tuple[ast.AST, str]]:
    """Every (node, English template) of a cell's source that it prints or draws, in the order of the code
    (a label of the notebook, :func:`find_labels`, is not one: it has its own message)."""
    out, seen = [], set()
    for node in _shown_nodes(ast.parse(_code(source))):
        template = _template(node)
        if id(node) in seen or template is None or not WORDS.search(_literal(template)) \
                or (_str(node) and node.value in labels):
            continue
        seen.add(id(node))
        out.append((node, template))
    return sorted(out, key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def templates(source: str, labels=()) -> list[str]:
    """The msgids of a cell, each once, in order (``labels``: the notebook's, which have their own message)."""
    return list(dict.fromkeys(template for _, template in shown(source, labels)))


HEADER = re.compile(r"""\{('[^'\\{}]*'|"[^"\\{}]*")([!:][^{}]*)?\}""")
"""A placeholder that formats a string written in it, a table's column header: ``{'time ratio':>10}``.
Its words are text to translate (``{'tỉ lệ thời gian':>10}``); its conversion and format are kept."""


def _literal(template: str) -> str:
    """The words of a template: its text, and the headers' (:data:`HEADER`), every other placeholder out."""
    text = HEADER.sub(lambda m: " " + m.group(1)[1:-1] + " ", template.replace("{{", "").replace("}}", ""))
    return PLACEHOLDER.sub(" ", text)


def _shape(placeholder: str) -> str:
    """A placeholder with a header's words taken out (``{'':>10}``): what a translation must keep."""
    return HEADER.sub(lambda m: "{''" + (m.group(2) or "") + "}", placeholder)


def _placeholders(template: str) -> Counter:
    return Counter(_shape(p) for p in PLACEHOLDER.findall(template.replace("{{", "").replace("}}", "")))


def problems(english: str, translation: str) -> list[str]:
    """Why ``translation`` cannot replace ``english`` in the code (empty: it can)."""
    out = []
    if re.search(r"\{[^{}]*\{", english.replace("{{", "").replace("}}", "")):
        return ["the English has a placeholder inside a placeholder (a nested format such as {x:{width}}): "
                "compute that value in a variable first"]
    if _placeholders(translation) != _placeholders(english):
        out.append(f"its placeholders {sorted(_placeholders(translation))} are not the English "
                   f"{sorted(_placeholders(english))} (keep each {{...}} exactly: the value prints the same)")
    if sorted(NUMBER.findall(_literal(translation))) != sorted(NUMBER.findall(_literal(english))):
        out.append("its numbers are not the English ones (only the words change)")
    return out


# ---------------------------------------------------------------- writing the translated code


def _quoted(text: str) -> str:
    """``text`` as a Python literal, double quotes unless it holds one (the course's style)."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        literal = '"' + literal[1:-1].replace("\\'", "'") + '"'
    return literal


def _node(template: str, fields: dict[str, ast.AST], fstring: bool) -> ast.AST:
    """The string or f-string node of a translated template (its placeholders: the English nodes)."""
    if not fstring:
        return ast.Constant(template.replace("{{", "{").replace("}}", "}"))
    parts = re.split(r"(\{[^{}]*\})", template.replace("{{", "\0").replace("}}", "\1"))
    values = []
    for i, part in enumerate(parts):
        if i % 2 and (header := HEADER.fullmatch(part)):  # a header: the English format around the translated words
            english = fields[_shape(part)]
            values.append(ast.FormattedValue(ast.Constant(header.group(1)[1:-1]), english.conversion,
                                             english.format_spec))
        elif i % 2:
            values.append(fields[part])
        elif part:
            values.append(ast.Constant(part.replace("\0", "{").replace("\1", "}")))
    return ast.JoinedStr(values)


def _unparse(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return _quoted(node.value)
    text = ast.unparse(node)
    if not node.values or not any(isinstance(v, ast.FormattedValue) for v in node.values):
        return _quoted("".join(v.value for v in node.values))  # no placeholder left: a plain string
    if text.startswith("f'") and '"' not in text:
        text = 'f"' + text[2:-1].replace("\\'", "'") + '"'
    return text


def _pieces(template: str, count: int) -> list[str]:
    """``template`` cut at spaces into at most ``count`` pieces of about equal length (never in a placeholder)."""
    if count <= 1:
        return [template]
    cuts, depth = [], 0
    for at, char in enumerate(template):
        depth += char == "{"
        depth -= char == "}"
        if char == " " and depth == 0:
            cuts.append(at + 1)
    pieces, start = [], 0
    for k in range(1, count):
        goal = len(template) * k // count
        best = min((c for c in cuts if c > start), key=lambda c: abs(c - goal), default=None)
        if best is None or best >= len(template):
            break
        pieces.append(template[start:best])
        start = best
    return [*pieces, template[start:]]


def _fields(node: ast.AST) -> dict[str, ast.AST]:
    """Each placeholder of an f-string node's template, with its FormattedValue."""
    return {_shape(_template(ast.JoinedStr([value]))): value for value in getattr(node, "values", [])
            if isinstance(value, ast.FormattedValue)}


def rewrite(source: str, translations: dict[str, str], labels: dict[str, str] | None = None) -> str:
    """``source`` with each string it shows replaced by its translation (``translations``: msgid -> msgstr),
    and every occurrence of a label of the notebook by its own (``labels``: English -> translation)."""
    labels = labels or {}
    lines = source.splitlines(keepends=True)
    raw = [line.encode("utf-8") for line in lines]
    edits = []
    tree = ast.parse(_code(source))
    inner = _inside_fstring(tree)
    for node in ast.walk(tree):
        if _str(node) and node.value in labels and id(node) not in inner:
            edits.append((node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset,
                          _quoted(labels[node.value])))
    for node, template in shown(source, labels):
        translation = translations[template]
        fstring = isinstance(node, ast.JoinedStr)
        span = node.end_lineno - node.lineno + 1
        indent = b" " * node.col_offset
        opening = raw[node.lineno - 1][node.col_offset:node.col_offset + 4].lstrip(b"fF")[:3]
        if opening in (b'"""', b"'''") and not re.search(r'"|\\', translation):  # a docstring-like text: as written
            body = translation if fstring else translation.replace("{{", "{").replace("}}", "}")
            text = ("f" if fstring else "") + '"""' + body + '"""'
        else:
            pieces = [_node(piece, _fields(node), fstring) for piece in _pieces(translation, span)]
            text = ("\n" + indent.decode()).join(_unparse(piece) for piece in pieces)
        edits.append((node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset, text))
    for first, start, last, end, text in sorted(edits, reverse=True):  # bottom up: earlier offsets stay right
        head, tail = raw[first][:start], raw[last][end:]
        raw[first: last + 1] = [head + text.encode("utf-8") + tail]
    return b"".join(raw).decode("utf-8")


def blanked(source: str, labels=()) -> str:
    """The cell's code with the words of every string it shows, and of every label (``labels``: the
    notebook's, in this edition), taken out (its placeholders kept, in a fixed order): the two editions of a
    demo cell compare equal, and only if nothing else differs."""
    tree = ast.parse(_code(source))
    places = {(node.lineno, node.col_offset) for node, _ in shown(source, labels)}
    places |= {(node.lineno, node.col_offset) for node in ast.walk(tree) if _str(node) and node.value in labels}
    inner = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
             for part in ast.walk(node) if part is not node}  # an f-string's parts: positions unreliable in 3.11
    for node in ast.walk(tree):
        if id(node) in inner:
            continue
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and (getattr(node, "lineno", 0), node.col_offset) in places:
            if isinstance(node, ast.JoinedStr):
                for value in node.values:  # a header's words too (its format stays)
                    if isinstance(value, ast.FormattedValue) and _str(value.value):
                        value.value.value = ""
                node.values = sorted((v for v in node.values if isinstance(v, ast.FormattedValue)), key=ast.dump)
            else:
                node.value = ""
    return ast.dump(tree)


# ---------------------------------------------------------------- labels: names shown and also used as keys

LABEL_CONTEXT = ":label"
"""A label's msgctxt is its notebook's name and this suffix: ``tiny_gpt:label`` (one message per notebook)."""
COURSE = Path(__file__).resolve().parent.parent / "course"


def _str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _inside_fstring(tree: ast.AST) -> set[int]:
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
            for part in ast.walk(node) if part is not node}


def _loops(tree: ast.AST):
    """(target, iterable, body nodes) of every ``for`` and comprehension (its first generator) of a tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            yield node.target, node.iter, node.body
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and len(node.generators) == 1:
            yield node.generators[0].target, node.generators[0].iter, [node.elt]
        elif isinstance(node, ast.DictComp) and len(node.generators) == 1:
            yield node.generators[0].target, node.generators[0].iter, [node.key, node.value]


def _over(target: ast.AST, iterable: ast.AST):
    """(container name, the target name bound to its keys or elements) of ``for target in iterable``:
    ``C``, ``C.keys()``, ``C.items()`` (the key), ``enumerate(C)`` (the element), ``zip(C, ...)``."""
    call = iterable if isinstance(iterable, ast.Call) and not iterable.keywords else None
    if isinstance(iterable, ast.Name) and isinstance(target, ast.Name):
        yield iterable.id, target
    elif call and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and not call.args:
        if call.func.attr == "keys" and isinstance(target, ast.Name):
            yield call.func.value.id, target
        elif call.func.attr == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2 \
                and isinstance(target.elts[0], ast.Name):
            yield call.func.value.id, target.elts[0]
    elif call and _name(call.func) == "enumerate" and len(call.args) == 1 and isinstance(target, ast.Tuple) \
            and len(target.elts) == 2:
        yield from _over(target.elts[1], call.args[0])
    elif call and _name(call.func) == "zip" and isinstance(target, ast.Tuple) and len(target.elts) == len(call.args):
        for sub, arg in zip(target.elts, call.args, strict=True):
            yield from _over(sub, arg)


class _Cell:
    """One demo cell's tree, with what the label search needs of it."""

    def __init__(self, source: str):
        self.tree = ast.parse(_code(source))
        self.parents = _parents(self.tree)
        self.shown = _names_of(_shown_exprs(self.tree))
        self.in_fstring = _inside_fstring(self.tree)
        self.in_placeholder = {id(part) for node in ast.walk(self.tree) if isinstance(node, ast.FormattedValue)
                               for part in ast.walk(node.value)}
        self.displayed = {id(node) for call in ast.walk(self.tree) if isinstance(call, ast.Call)
                          and (_name(call.func) == "print" or _name(call.func).startswith(HELPERS))
                          for node in ast.walk(call) if node is not call}  # anything inside a print or a helper call

    def _keyed(self, node: ast.AST, keyed: set[str]) -> bool:
        """``node`` is the key written into a container of ``keyed`` (``C[node] = ...``), the key of a dict
        comprehension assigned to one or handed to a plotting helper."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Subscript) and parent.slice is node and isinstance(parent.ctx, ast.Store):
            return isinstance(parent.value, ast.Name) and parent.value.id in keyed
        if isinstance(parent, ast.DictComp) and parent.key is node:
            holder = self.parents.get(id(parent))
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                return holder.targets[0].id in keyed
            return isinstance(holder, (ast.Call, ast.keyword)) and id(parent) in self.displayed
        return False

    def showing(self, uses: list[ast.Name], keyed: set[str]) -> bool:
        """A name whose value reaches the screen: shown, or written as a key of a container whose keys are."""
        return any(id(use) in self.shown or self._keyed(use, keyed) for use in uses)


def _body_uses(body, name: str) -> list[ast.Name]:
    return [node for part in body for node in ast.walk(part) if isinstance(node, ast.Name) and node.id == name
            and not isinstance(node.ctx, ast.Store)]


def _keyed_containers(cells: list[_Cell]) -> set[str]:
    """The names of the containers whose keys (a dict's) or elements (a list's) the notebook shows: iterated by
    a loop whose name for them is shown, or written as a key of another such container (a fixpoint)."""
    keyed: set[str] = set()
    while True:
        found = {container for cell in cells for target, iterable, body in _loops(cell.tree)
                 for container, bound in _over(target, iterable)
                 if cell.showing(_body_uses(body, bound.id), keyed)}
        if found <= keyed:
            return keyed
        keyed |= found


def _label_nodes(cell: _Cell, keyed: set[str]):
    """The string literals of a cell that are labels: the keys (elements) of a container the notebook shows,
    written in a literal assigned to it or as ``C["..."] = ...``; and a loop's own literal bound to a name
    the loop both shows (or writes as such a key) and uses otherwise (a name it only shows: :func:`_labels`)."""
    for node in ast.walk(cell.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in keyed:
            value = node.value
            yield from (k for k in getattr(value, "keys", []) if k is not None and _str(k))
            if isinstance(value, (ast.List, ast.Tuple)):
                yield from (e for e in value.elts if _str(e))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name) \
                and node.value.id in keyed and _str(node.slice):
            yield node.slice
    for target, iterable, body in _loops(cell.tree):
        for name, string in _iterated(target, iterable):
            uses = _body_uses(body, name)
            if _str(string) and cell.showing(uses, keyed) and not all(id(use) in cell.shown for use in uses):
                yield string


def find_labels(sources: list[str]) -> dict[str, list[int]]:
    """The labels of a notebook (``sources``: its demo cells' code, in order), each with the indices of
    the cells that hold it, in the order of their first occurrence: a string a demo cell shows through a
    name other cells read, or also uses as a key (chapter 10's ``ladder = {"counted bigram": ...}``)."""
    cells = [_Cell(source) for source in sources]
    keyed = _keyed_containers(cells)
    labels = {node.value for cell in cells for node in _label_nodes(cell, keyed) if WORDS.search(node.value)}
    where: dict[str, list[int]] = {}
    for at, cell in enumerate(cells):
        for node in sorted((n for n in ast.walk(cell.tree) if _str(n) and n.value in labels
                            and id(n) not in cell.in_fstring), key=lambda n: (n.lineno, n.col_offset)):
            where.setdefault(node.value, [])
            if at not in where[node.value]:
                where[node.value].append(at)
    return where


_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_INSPECTING = {"len", "sorted", "min", "max", "reversed", "ord", "hash", "id", "str", "repr"}


@functools.cache
def _course_strings() -> frozenset[str]:
    """Every string literal of the course's package (``course/``): a helper may look a label up."""
    out = set()
    for path in sorted(COURSE.rglob("*.py")):
        out |= {node.value for node in ast.walk(ast.parse(path.read_text())) if _str(node)}
    return frozenset(out)


def _computed_with(node: ast.AST, parents: dict[int, ast.AST]) -> str | None:
    """How the code computes with the value of ``node`` (a label, or a name holding one) beyond handing it
    on, comparing it for equality or looking it up; ``None``: it does not."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return f"its method .{parent.attr} is called"
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return "it is sliced or indexed"
    if isinstance(parent, ast.BinOp):
        return "it is composed with another value (+, %, *)"
    if isinstance(parent, ast.Compare) and any(isinstance(op, _ORDERING) for op in parent.ops):
        return "it is ordered (<, >)"
    if isinstance(parent, ast.Compare) and node in parent.comparators \
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in parent.ops):
        return "a text is searched in it (in)"
    if isinstance(parent, ast.Call) and node in parent.args and _name(parent.func) in _INSPECTING:
        return f"it is passed to {_name(parent.func)}()"
    if isinstance(parent, ast.FormattedValue):
        return "it is a placeholder of an f-string that is not printed or drawn"
    return None


def label_problems(cells, translations: dict[str, str]) -> dict[str, list[str]]:
    """Why each label cannot be renamed to its translation (empty lists: it can). ``cells``: the notebook's
    code cells as (cell id, source, demo?); ``translations``: label -> translation. A translation equal to
    the English renames nothing and is always accepted (``GPT``, ``MHA``). Refused: a label that a graded,
    solution or locked cell or a module of ``course/`` also writes (renaming it in the demo cells alone
    could change what they compute); two labels, or a label and another string of the notebook's code, that
    would read the same; a label the code computes with (sliced, composed, ordered, sorted, measured with
    len, a method called on it) or looks up inside an f-string's placeholder; a container of labels sorted."""
    out = {label: [] for label in translations}
    renamed = {label: text for label, text in translations.items() if text != label}
    if not renamed:
        return out
    demo = [(cell_id, _Cell(source)) for cell_id, source, is_demo_cell in cells if is_demo_cell]
    keyed = _keyed_containers([cell for _, cell in demo])
    course = _course_strings()
    strings: dict[str, set[str]] = {}  # every string literal of the code, with the cells that write it
    for cell_id, source, is_demo_cell in cells:
        for node in ast.walk(ast.parse(_code(source))):
            if _str(node):
                strings.setdefault(node.value, set()).add(cell_id if not is_demo_cell else "")
    graded = {cell_id for cell_id, _, is_demo_cell in cells if not is_demo_cell}
    for label, text in renamed.items():
        where = sorted(strings.get(label, set()) & graded)
        if where:
            out[label].append(f"the graded, solution or locked cell(s) {', '.join(where)} also write it: renaming it "
                              "in the demo cells alone could change what they compute (keep the English, or give "
                              "the demo cells a name of their own for it)")
        if label in course:
            out[label].append("a module of course/ also writes it (a helper may look it up): keep the English")
        same = sorted(other for other, its in translations.items() if other != label and its == text)
        if same:
            out[label].append(f"{', '.join(map(repr, same))} would read the same: two labels must stay two keys")
        if text in strings and renamed.get(text, text) == text:  # another label's English is free if it is renamed
            out[label].append(f"{text!r} is already a string of the notebook's code: the renamed label would meet it")
    owners = _owners([cell for _, cell in demo], keyed)
    for _, cell in demo:
        bound: dict[str, tuple[set[str], list[ast.Name]]] = {}  # a loop's name for labels: which, and its uses
        for target, iterable, body in _loops(cell.tree):
            for container, name in _over(target, iterable):
                if container in owners:
                    bound.setdefault(name.id, (set(), []))[0].update(owners[container])
                    bound[name.id][1].extend(_body_uses(body, name.id))
            for name, string in _iterated(target, iterable):
                if _str(string) and string.value in translations:
                    bound.setdefault(name, (set(), []))[0].add(string.value)
                    bound[name][1].extend(_body_uses(body, name))
        for node in ast.walk(cell.tree):
            if _str(node) and node.value in renamed:
                how = ("it is looked up inside an f-string's placeholder: look it up in a name first"
                       if id(node) in cell.in_placeholder else _computed_with(node, cell.parents))
                if how:
                    out[node.value].append(f"the code computes with it ({how}): renaming could change what it does")
            elif isinstance(node, ast.Call) and _name(node.func) in ("sorted", "min", "max") and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in owners:
                for label in owners[node.args[0].id] & set(renamed):
                    out[label].append(f"{node.args[0].id} is passed to {_name(node.func)}(): renaming could reorder it")
        for name, (labels, uses) in bound.items():
            for use in uses:
                how = _computed_with(use, cell.parents)
                if how and not (isinstance(cell.parents.get(id(use)), ast.FormattedValue)
                                and (id(use) in cell.shown or id(use) in cell.displayed)):
                    for label in labels & set(renamed):
                        out[label].append(f"the code computes with it through the name {name} ({how}): renaming "
                                          "could change what it does")
    return {label: list(dict.fromkeys(problems)) for label, problems in out.items()}


def _owners(cells: list[_Cell], keyed: set[str]) -> dict[str, set[str]]:
    """Which labels each container of labels holds: written in it (a literal, ``C["..."] = ...``), or taken
    from another one or from a loop's own literals (``C[name] = ...``, ``{name: ... for name in D}``)."""
    owners: dict[str, set[str]] = {}
    for cell in cells:
        for node in _label_nodes(cell, keyed):
            holder = cell.parents.get(id(node))
            assign = holder if isinstance(holder, ast.Assign) else cell.parents.get(id(holder))
            if isinstance(holder, ast.Subscript):
                owners.setdefault(holder.value.id, set()).add(node.value)
            elif isinstance(assign, ast.Assign) and isinstance(assign.targets[0], ast.Name):
                owners.setdefault(assign.targets[0].id, set()).add(node.value)
    while True:
        before = {name: set(labels) for name, labels in owners.items()}
        for cell in cells:
            for target, iterable, body in _loops(cell.tree):
                carried = {name.id: set(owners.get(container, ())) for container, name in _over(target, iterable)}
                for name, string in _iterated(target, iterable):
                    if _str(string):
                        carried.setdefault(name, set()).add(string.value)
                for name, labels in carried.items():
                    for use in _body_uses(body, name):
                        parent = cell.parents.get(id(use))
                        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store) \
                                and isinstance(parent.value, ast.Name):
                            owners.setdefault(parent.value.id, set()).update(labels)
                        elif isinstance(parent, ast.DictComp) and parent.key is use:
                            holder = cell.parents.get(id(parent))
                            if isinstance(holder, ast.Assign) and isinstance(holder.targets[0], ast.Name):
                                owners.setdefault(holder.targets[0].id, set()).update(labels)
        if owners == before:
            return owners
