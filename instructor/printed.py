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
  "..."``). A string that only formats (no word of two letters) is left as it is. Every other
  string (a dict key the code looks up, a token, a mode such as ``"relu"``) is code and stays.
* **What a translation may change**: the words. It keeps every ``{placeholder}`` of the English,
  conversion and format included (the numbers print the same), and every number written in the
  text (``1/8``, ``ln 12``): :func:`problems` refuses anything else, and so does ``translate
  --check``.
"""

from __future__ import annotations

import ast
import re
from collections import Counter

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
    everywhere = _uses([tree])
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
        names = base | _names_of(found)
        if names == shown:
            break
        shown = names
    yield from fixed
    yield from found


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


def shown(source: str) -> list[tuple[ast.AST, str]]:
    """Every (node, English template) of a cell's source that it prints or draws, in the order of the code."""
    out, seen = [], set()
    for node in _shown_nodes(ast.parse(_code(source))):
        template = _template(node)
        if id(node) in seen or template is None or not WORDS.search(_literal(template)):
            continue
        seen.add(id(node))
        out.append((node, template))
    return sorted(out, key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def templates(source: str) -> list[str]:
    """The msgids of a cell, each once, in order."""
    return list(dict.fromkeys(template for _, template in shown(source)))


def _literal(template: str) -> str:
    return PLACEHOLDER.sub(" ", template.replace("{{", "").replace("}}", ""))


def _placeholders(template: str) -> Counter:
    return Counter(PLACEHOLDER.findall(template.replace("{{", "").replace("}}", "")))


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
        if i % 2:
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
    return {_template(ast.JoinedStr([value])): value for value in getattr(node, "values", [])
            if isinstance(value, ast.FormattedValue)}


def rewrite(source: str, translations: dict[str, str]) -> str:
    """``source`` with each string it shows replaced by its translation (``translations``: msgid -> msgstr)."""
    lines = source.splitlines(keepends=True)
    raw = [line.encode("utf-8") for line in lines]
    edits = []
    for node, template in shown(source):
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


def blanked(source: str) -> str:
    """The cell's code with the words of every string it shows taken out (its placeholders kept, in a fixed
    order): the two editions of a demo cell compare equal, and only if nothing else differs."""
    tree = ast.parse(_code(source))
    places = {(node.lineno, node.col_offset) for node, _ in shown(source)}
    inner = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
             for part in ast.walk(node) if part is not node}  # an f-string's parts: positions unreliable in 3.11
    for node in ast.walk(tree):
        if id(node) in inner:
            continue
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and (getattr(node, "lineno", 0), node.col_offset) in places:
            if isinstance(node, ast.JoinedStr):
                node.values = sorted((v for v in node.values if isinstance(v, ast.FormattedValue)), key=ast.dump)
            else:
                node.value = ""
    return ast.dump(tree)
