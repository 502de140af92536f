"""Collection: a class folder or zip into ``submitted/<student>/<assignment>/``, dropping nothing silently.

The class is one folder per student (``alice/two_keys.ipynb``), as folders or in a zip, possibly
inside wrapping folders (``export/alice/...``: a lone folder holding several folders, or
folders and no notebook, is stepped into). Every entry of the class is accounted for:

* **a student folder**, whatever its name: ``carl von space/`` and ``zoë-ñ/`` become the
  student ids ``carl-von-space-<hash>`` and ``zoe-n-<hash>`` (an ASCII slug and 8 hex digits
  of the SHA-256 of the name: the same name gives the same id on every run and machine). A
  name that already is a safe id (letters, digits, ``_.@+-``; university ids, e-mail
  addresses) is kept as it is. ``submitted/.student-folders.json`` maps each id back to the
  folder name, which the summary, the report and ``grades.csv`` show.
* its **notebooks**, found at any depth (``alice/two_keys/two_keys.ipynb``) and in zips inside
  it (``alice/work.zip``): the one named as released goes to ``submitted/`` under that name
  (the shallowest, if several are); every other notebook is copied beside it under its own
  name (``two_keys-Copy1.ipynb``, ``old__two_keys.ipynb`` for ``old/two_keys.ipynb``), so
  the repair step (``nboracle.grader.repair``) lists them for review with how many answers each
  holds. Other files (``notes.txt``) are never copied (a student's ``numpy.py`` next to the
  notebook would shadow numpy in the grading kernel): they are named in the report.
* a folder without the notebook still gets its (empty) submission folder, so the batch reports
  it ("two_keys.ipynb is missing").
* **refused**, by name, in the summary and the report: a file at the top of the class (not in a
  student folder), an unsafe zip member (``../x``, an absolute path, a link), a name whose id
  is taken by another folder. **Ignored**, and listed: ``__MACOSX/``, ``.DS_Store`` and
  other hidden entries.

Nothing a student made is changed: the zip stays in ``downloaded/<assignment>/archive/`` and
everything it holds in ``downloaded/<assignment>/extracted/`` (both git-ignored; ``make clean``
removes them).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from . import pipeline as P

SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+\-]{0,63}\Z")
NAMES_FILE = ".student-folders.json"  # in submitted/: {student id: folder name as handed in}
COLLECTED_FILE = "collected.json"  # in downloaded/<assignment>/: what the last collection found
JUNK = {"__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini", ".ipynb_checkpoints", "__pycache__"}
LISTED_FILES = 10  # other files named per student at most


@dataclass
class Collected:
    """What one collection found: students (id -> folder name), refusals, ignored entries, notes."""

    students: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # entry as handed in -> why
    ignored: list[str] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)  # student id -> what collection saw

    def to_json(self) -> dict:
        return {"students": self.students, "refused": self.refused, "ignored": self.ignored, "notes": self.notes}


# ---------------------------------------------------------------- names


def student_id(folder_name: str) -> str:
    """A safe, stable student id for a folder name (the name itself when it is already safe)."""
    name = unicodedata.normalize("NFC", folder_name)
    if SAFE_ID.match(name):
        return name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9_.@+\-]+", "-", ascii_name).strip("-_.@+")[:40].rstrip("-_.@+") or "student"
    return f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def folder_names(root) -> dict[str, str]:
    """{student id: folder name as handed in} of every renamed student of a course root."""
    path = Path(root.path) / "submitted" / NAMES_FILE
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _remember_names(root, students: dict[str, str]) -> None:
    renamed = {sid: name for sid, name in students.items() if sid != name}
    if not renamed:
        return
    path = Path(root.path) / "submitted" / NAMES_FILE
    names = {**folder_names(root), **renamed}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(names, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def _junk(name: str) -> bool:
    return name in JUNK or name.startswith(".") or name.startswith("._")


# ---------------------------------------------------------------- unpacking


def _unsafe(member: zipfile.ZipInfo) -> str | None:
    parts = PurePosixPath(member.filename.replace("\\", "/")).parts
    if member.filename.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", member.filename) or ".." in parts:
        return "a path outside the zip"
    if stat.S_ISLNK(member.external_attr >> 16):
        return "a link"
    return None


# Unpacked sizes a zip may reach (a zip bomb fills the disk otherwise): a notebook is a few MB.
MEMBER_LIMIT = 64 * 2**20
ZIP_LIMIT = 2 * 2**30


def _copy_at_most(src, dst, limit: int) -> int:
    """Copy up to ``limit`` bytes; the number copied, or -1 if there was more."""
    copied = 0
    while chunk := src.read(min(2**20, limit + 1 - copied)):
        copied += len(chunk)
        if copied > limit:
            return -1
        dst.write(chunk)
    return copied


def _extract(zip_path: Path, into: Path, refused: dict[str, str], label: str) -> None:
    """Extract a zip member by member, refusing paths outside it, links, and what unpacks too big
    (counted while unpacking: the sizes a zip states may lie)."""
    left = ZIP_LIMIT
    with zipfile.ZipFile(zip_path) as zf:
        for member in zf.infolist():
            why = _unsafe(member)
            if why:
                refused[f"{label}:{member.filename}"] = f"{why}: not extracted"
                continue
            target = into.joinpath(*PurePosixPath(member.filename.replace("\\", "/")).parts)
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            limit = min(MEMBER_LIMIT, left)
            with zf.open(member) as src, open(target, "wb") as dst:
                copied = _copy_at_most(src, dst, limit)
            if copied < 0:
                target.unlink()
                refused[f"{label}:{member.filename}"] = (
                    f"unpacks to more than {MEMBER_LIMIT // 2**20} MB: not extracted" if limit == MEMBER_LIMIT else
                    f"the zip unpacks to more than {ZIP_LIMIT // 2**30} GB in all: not extracted")
                continue
            left -= copied


def _class_level(folder: Path) -> Path:
    """The folder whose entries are the student folders: wrapping folders are stepped into."""
    while True:
        entries = [e for e in folder.iterdir() if not _junk(e.name)]
        if len(entries) != 1 or not entries[0].is_dir() or entries[0].is_symlink():
            return folder
        inner = entries[0]
        subfolders = [e for e in inner.iterdir() if e.is_dir() and not _junk(e.name)]
        # a wrapper holds several folders, or folders and no notebook; a student's folder (a class
        # of one) holds its notebook
        if len(subfolders) < 2 and (any(inner.glob("*.ipynb")) or not subfolders):
            return folder
        folder = inner


# ---------------------------------------------------------------- one student


def _files(folder: Path, notes: list[str], refused: dict[str, str], label: str) -> list[Path]:
    """Every regular file of a student folder (zips in it extracted beside them), junk left out."""
    for archive in sorted(folder.rglob("*.zip")):
        if archive.is_file() and not archive.is_symlink() and zipfile.is_zipfile(archive):
            into = archive.with_name(archive.stem + "_zip")
            into.mkdir(exist_ok=True)
            _extract(archive, into, refused, f"{label}/{archive.relative_to(folder)}")
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(_junk(part) for part in rel.parts):
            continue
        if path.is_symlink():
            notes.append(f"{rel.as_posix()} is a link: not collected")
        elif path.is_file() and path.suffix != ".zip":
            found.append(path)
    return found


def _place(folder: Path, expected: list[str], dest: Path, notes: list[str], refused, label: str) -> None:
    """Copy a student's notebooks into their submission folder (see the module doc)."""
    files = _files(folder, notes, refused, label)
    notebooks = [p for p in files if p.suffix == ".ipynb"]
    for old in dest.glob("*.ipynb"):  # a collection replaces the previous one
        old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    taken = set()
    for name in expected:
        same = sorted((p for p in notebooks if p.name == name), key=lambda p: (len(p.relative_to(folder).parts), str(p)))
        if same:
            shutil.copy2(same[0], dest / name)
            taken.add(same[0])
            if same[0].parent != folder:
                notes.append(f"{name} was found in {same[0].parent.relative_to(folder).as_posix()}/")
    for path in notebooks:
        if path in taken:
            continue
        flat = "__".join(path.relative_to(folder).parts)
        shutil.copy2(path, dest / flat)
    others = [p.relative_to(folder).as_posix() for p in files if p.suffix != ".ipynb"]
    if others:
        more = f" and {len(others) - LISTED_FILES} more" if len(others) > LISTED_FILES else ""
        notes.append(f"handed in besides the notebook(s), not graded: {', '.join(others[:LISTED_FILES])}{more}")


# ---------------------------------------------------------------- the class


def collect_class(root, assignment: str, source: Path) -> Collected:
    """Collect a class folder or zip of ``<student>/<notebook>.ipynb`` into ``submitted/``."""
    source = Path(source).resolve()
    if not source.exists():
        raise P.PipelineError(f"no submissions at {source}")
    if source.is_file() and not zipfile.is_zipfile(source):
        raise P.PipelineError(f"{source} is neither a folder nor a zip file")
    expected = sorted(p.name for p in root.folder("release", assignment).glob("*.ipynb"))
    if not expected:
        raise P.PipelineError(f"release/{assignment} has no notebook: run "
                              f"`{root.release_command.format(assignment=assignment)}`")
    archive, extracted = root.archive(assignment), root.archive(assignment).parent / "extracted"
    if source.is_relative_to(archive.parent.resolve()):
        raise P.PipelineError(f"{source} is inside {archive.parent}, which collection empties first: "
                              "copy it elsewhere and collect from there")
    for folder in (archive, extracted):
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
    found = Collected()
    if source.is_dir():
        shutil.copytree(source, extracted / source.name, symlinks=True)
    else:
        shutil.copy2(source, archive / source.name)
        _extract(source, extracted, found.refused, source.name)
    level = _class_level(extracted)
    owner: dict[str, str] = {}
    for entry in sorted(level.iterdir()):
        name = unicodedata.normalize("NFC", entry.name)
        if _junk(entry.name):
            found.ignored.append(name)
            continue
        if entry.is_symlink():
            found.refused[name] = "a link, not a student folder"
            continue
        if entry.is_file() and entry.suffix == ".zip" and zipfile.is_zipfile(entry):
            unpacked = entry.with_name(entry.stem + "_zip")
            _extract(entry, unpacked, found.refused, name)
            folder, name = unpacked, unicodedata.normalize("NFC", entry.stem)
        elif entry.is_dir():
            folder = entry
        else:
            found.refused[name] = "a file at the top of the class, not in a student folder: whose is it?"
            continue
        sid = student_id(name)
        if sid in owner:
            found.refused[name] = f"its student id {sid} is already the folder {owner[sid]!r}'s"
            continue
        owner[sid] = name
        notes = found.notes.setdefault(sid, [])
        _place(folder, expected, root.folder("submitted", assignment, sid), notes, found.refused, name)
        found.students[sid] = name
        if not notes:
            del found.notes[sid]
    _remember_names(root, found.students)
    (archive.parent / COLLECTED_FILE).write_text(json.dumps(found.to_json(), indent=1, ensure_ascii=False) + "\n")
    return found


def last_collection(root, assignment: str) -> Collected:
    """What the last collection of ``assignment`` found (empty when there was none)."""
    path = root.archive(assignment).parent / COLLECTED_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Collected()
    return Collected(**{k: data.get(k, v) for k, v in Collected().to_json().items()})


# ---------------------------------------------------------------- accounting for every submission


NOT_GRADED = ("skipped", "failed", "refused")


def exit_status(assignment: str, reports: dict) -> tuple[int, str | None]:
    """0 when every submission was graded (or unchanged), else 1 and a line saying what was not."""
    missed = {s: sum(r.status == s for r in reports.values()) for s in NOT_GRADED}
    total = sum(missed.values())
    if not total:
        return 0, None
    parts = ", ".join(f"{n} {s}" for s, n in missed.items() if n)
    return 1, (f"grade-class {assignment}: {total} of {len(reports)} submission(s) not graded ({parts}); "
               f"see the report")


def add_folder_column(csv_path: Path, root) -> Path:
    """A ``folder`` column in a grades CSV: the folder name as handed in, for renamed students."""
    import csv

    names = folder_names(root)
    with open(csv_path, newline="") as handle:
        reader = csv.DictReader(handle)
        rows, fields = list(reader), list(reader.fieldnames or [])
    if "folder" not in fields:
        fields.append("folder")
    for row in rows:
        row["folder"] = names.get(row.get("student_id", ""), "")
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return csv_path
