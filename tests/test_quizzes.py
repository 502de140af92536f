"""Quizzes a guess cannot pass: options alike in length, right letters spread, feedback per wrong option."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for p in (ROOT / "source").glob("[0-9][0-9]_*/*.py"))
QUESTION = re.compile(r"\*\*(Q\d+)\.\*\*(.*?)(?=\*\*Q\d+\.\*\*|\Z)", re.S)
OPTION = re.compile(r"^\* ([a-e])\) (.*?)(?=^\* [a-e]\) |^\s*$|\Z)", re.S | re.M)


@dataclass
class Question:
    chapter: str
    name: str
    options: dict[str, str]  # letter -> option text, whitespace collapsed
    right: str  # the letter the solution cell assigns
    wrong: dict[str, str]  # letter -> feedback, from the hidden test


def _graded_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def _feedback(source: str, name: str) -> dict[str, str]:
    """The literal feedback dict a hidden test gives check_option for question ``name``."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check_option"
                and ast.literal_eval(node.args[0]) == name):
            return ast.literal_eval(node.args[2])
    raise AssertionError(f"{name}: its graded cell does not grade it with check_option(name, answer, feedback)")


def _questions(path: Path) -> list[Question]:
    cells = jupytext.read(path).cells
    texts = {}
    for cell in cells:
        if cell.cell_type == "markdown":
            for name, body in QUESTION.findall(cell.source):
                texts[name] = {letter: " ".join(text.split()) for letter, text in OPTION.findall(body)}
    solution = next((c.source for c in cells if _graded_id(c).startswith("quiz")), None)
    if solution is None:
        return []
    answers: dict = {}
    exec(solution.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0], answers)  # plain assignments
    questions = []
    for cell in cells:
        match = re.fullmatch(r"test_quiz_q(\d+)", _graded_id(cell))
        if match:
            name = f"Q{match[1]}"
            assert name in texts, f"{path.name}: {name} is graded but its options are not written as '* a) ...'"
            questions.append(Question(path.parent.name, name, texts[name], answers[name].strip().lower(),
                                      _feedback(cell.source, name)))
    return questions


QUESTIONS = [q for path in SOURCES for q in _questions(path)]


def test_every_chapter_after_the_first_has_a_quiz():
    assert {q.chapter for q in QUESTIONS} >= {p.parent.name for p in SOURCES if not p.parent.name.startswith("01")}
    assert len(QUESTIONS) >= 35


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: f"{q.chapter}-{q.name}")
def test_each_wrong_option_has_its_own_feedback_and_none_names_the_right_letter(question):
    letters = "".join(sorted(question.options))
    assert len(letters) >= 3 and letters == "abcde"[:len(letters)], f"options {letters!r}"
    assert question.right in letters and question.right not in question.wrong, \
        "the solution's letter must be the one option without feedback"
    assert set(question.wrong) == set(letters) - {question.right}
    for letter, text in question.wrong.items():
        assert len(text) >= 30, f"({letter}): feedback must name the misconception, not only say 'wrong'"
        assert not re.search(rf"\({question.right}\)|\boption {question.right}\b", text), \
            f"({letter})'s feedback names the right letter"


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: f"{q.chapter}-{q.name}")
def test_options_are_alike_in_length(question):
    """No option more than 1.5 times as long as another (short answers, numbers or shapes, excepted)."""
    lengths = sorted(len(text) for text in question.options.values())
    assert lengths[-1] <= 16 or lengths[-1] <= 1.5 * lengths[0], \
        {letter: len(text) for letter, text in question.options.items()}


def test_length_is_no_cue_to_the_right_answer():
    """The right option is the longest in at most one question in three, and the shortest likewise.

    Longest means longer than every other option (a tie gives a guesser no single option to pick).
    """
    def alone(question, beats):
        right = len(question.options[question.right])
        return all(beats(right, len(text)) for letter, text in question.options.items() if letter != question.right)
    longest = [q.name for q in QUESTIONS if alone(q, lambda right, other: right > other)]
    shortest = [q.name for q in QUESTIONS if alone(q, lambda right, other: right < other)]
    assert len(longest) <= len(QUESTIONS) / 3, f"right option longest in {len(longest)} of {len(QUESTIONS)}"
    assert len(shortest) <= len(QUESTIONS) / 3, f"right option shortest in {len(shortest)} of {len(QUESTIONS)}"


def test_right_letters_are_spread():
    """Each letter is right about as often as chance makes it: within 30 % of its share over the course
    (1/3 of each three-option question, 1/4 of each four-option one), so no letter is a safe guess."""
    counts = Counter(q.right for q in QUESTIONS)
    for letter in "abcd":
        share = sum(1 / len(q.options) for q in QUESTIONS if letter in q.options)
        assert 0.7 * share <= counts[letter] <= 1.3 * share, (letter, counts[letter], round(share, 1), counts)


def _longer_options(question) -> int:
    """How many options are longer than the right one: 0 when it is the longest."""
    right = len(question.options[question.right])
    return sum(len(text) > right for text in question.options.values())


def test_length_ranks_of_the_right_option_are_spread():
    """Over the questions whose options are sentences, the right option is the longest, the second, the third
    or the fourth about equally often: no rank holds more than 35 % of them (second longest was 23 of 37)."""
    worded = [q for q in QUESTIONS if max(len(text) for text in q.options.values()) > 16]
    ranks = Counter(_longer_options(q) for q in worded)
    assert max(ranks.values()) <= 0.35 * len(worded), {f"{rank + 1}": n for rank, n in sorted(ranks.items())}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _stem(question_text: str) -> str:
    return re.split(r"^\* a\) ", question_text, flags=re.M)[0]


def _stems() -> dict[tuple[str, str], str]:
    stems = {}
    for path in SOURCES:
        for cell in jupytext.read(path).cells:
            if cell.cell_type == "markdown":
                for name, body in QUESTION.findall(cell.source):
                    stems[(path.parent.name, name)] = _stem(body)
    return stems


def test_no_two_questions_ask_alike():
    """No two stems of the course share more than half of their words (a repeated question tests one idea
    twice)."""
    stems = {key: set(_words(text)) for key, text in _stems().items()}
    keys = sorted(stems)
    for i, first in enumerate(keys):
        for second in keys[i + 1:]:
            a, b = stems[first], stems[second]
            assert len(a & b) <= 0.5 * len(a | b), f"{first} and {second} ask alike"


ECHO = 6  # words in a row


def _echoes(text: str, options: dict[str, str]) -> list[tuple[str, str]]:
    """(letter, words) of each option that repeats ECHO words in a row of ``text``."""
    padded = " " + " ".join(_words(text)) + " "
    found = []
    for letter, option in options.items():
        words = _words(option)
        for i in range(len(words) - ECHO + 1):
            run = " ".join(words[i:i + ECHO])
            if f" {run} " in padded:
                found.append((letter, run))
                break
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_no_option_repeats_the_chapter_text(path):
    """An option that repeats the lesson's words is picked by recognition, not understanding: no option shares
    six words in a row with the chapter's markdown outside its quiz (nor with its own question's stem)."""
    cells = jupytext.read(path).cells
    lesson = "\n".join(c.source for c in cells if c.cell_type == "markdown" and not QUESTION.search(c.source))
    stems = {key[1]: stem for key, stem in _stems().items() if key[0] == path.parent.name}
    for question in (q for q in QUESTIONS if q.chapter == path.parent.name):
        assert not _echoes(lesson, question.options), (question.name, _echoes(lesson, question.options))
        assert not _echoes(stems[question.name], question.options), (question.name, "echoes its stem")


def test_the_echo_check_finds_a_repeated_sentence():
    lesson = "Bidirectional attention suits classification because the whole input is there before the prediction."
    assert _echoes(lesson, {"a": "because the whole input is there before the prediction", "b": "a new case"}) == \
        [("a", "because the whole input is there")]
    assert not _echoes(lesson, {"a": "the input is there in full, before any label"})
