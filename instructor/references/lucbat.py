"""Chapter 10's meter references (the grader's side only): the tone and the rhyme of a Vietnamese syllable and the
lục bát meter of a text, written independently of the notebook's solution (a table of the tone marks, a regular
expression for the initial), and the hidden tests' comparisons with them on syllables and lines drawn from the poem.

A failing comparison names the mistake (a vowel letter's mark read as a tone, huyền counted as trắc, an initial left
in the rhyme, a share over lines instead of couplets, ...), never the expected answer.
"""

from __future__ import annotations

import functools
import math
import numbers
import random
import re
import unicodedata

from course.checks import attempt, check_true
from course.corpus import kieu_lines

# The five tones by their combining mark (NFD). Ngang has no mark.
TONE_OF_MARK = {"\u0300": "huyền", "\u0301": "sắc", "\u0303": "ngã", "\u0309": "hỏi", "\u0323": "nặng"}
MARK_WORDS = {"huyền": "huyền (the grave accent, as in 'là')", "sắc": "sắc (the acute accent, as in 'tài')",
              "hỏi": "hỏi (the hook above, as in 'cả')", "ngã": "ngã (the tilde, as in 'chữ')",
              "nặng": "nặng (the dot below, as in 'mệnh')", "ngang": "ngang (no tone mark, as in 'ta')"}
LEVEL = {"ngang", "huyền"}  # bằng; the other four are trắc
# The marks that make a vowel letter of its own: not tones.
LETTER_MARKS = {"\u0302": "the circumflex of â, ê, ô", "\u0306": "the breve of ă", "\u031b": "the horn of ơ, ư"}
VOWEL_LETTERS = "aăâeêioôơuưy"
INITIAL = re.compile(r"(ngh|ng|nh|ch|tr|th|kh|ph|gh|gi(?=[aăâeêioôơuưy])|qu|[bcdđghklmnprstvx])?")
ANSWERS = ("bằng", "trắc")


WORD = re.compile(r"\w(.*\w)?")


def _per_syllable(function):
    """``function`` of one syllable, computed once per plain string: the tests read the same few thousand syllables
    of the poem again and again (every grading in one grader process). Anything but a ``str`` is computed anew."""
    cached = functools.lru_cache(maxsize=1 << 16)(function)

    @functools.wraps(function)
    def lookup(syllable):
        return cached(syllable) if type(syllable) is str else function(syllable)

    return lookup


@_per_syllable
def letters(syllable):
    """The syllable without what surrounds its letters (punctuation), lowercased, NFC."""
    text = unicodedata.normalize("NFC", syllable).lower()
    match = WORD.search(text)
    return match.group(0) if match else ""


@_per_syllable
def tone_name(syllable):
    """ngang, huyền, sắc, hỏi, ngã or nặng, from the syllable's tone mark."""
    marks = [TONE_OF_MARK[c] for c in unicodedata.normalize("NFD", letters(syllable)) if c in TONE_OF_MARK]
    return marks[0] if marks else "ngang"


def reference_tone(syllable):
    return "bằng" if tone_name(syllable) in LEVEL else "trắc"


def toneless(syllable):
    """The letters with the tone mark taken away (the vowel letters' marks kept), NFC."""
    kept = "".join(c for c in unicodedata.normalize("NFD", letters(syllable)) if c not in TONE_OF_MARK)
    return unicodedata.normalize("NFC", kept)


def reference_rhyme_part(syllable):
    word = toneless(syllable)
    return word[INITIAL.match(word).end():]


def rhyme_sound(part):
    """The notebook's ear, written again: the final consonant, else the last vowel (marks dropped, y as i, o as u)."""
    bare = "".join(c for c in unicodedata.normalize("NFD", part) if not unicodedata.combining(c))
    for final in ("ng", "nh", "ch", "c", "m", "n", "p", "t"):
        if bare.endswith(final) and len(bare) > len(final):
            return final
    last = bare[-1:]
    return {"y": "i", "o": "u" if len(bare) > 1 else "o"}.get(last, last)


# ------------------------------------------------------------------ the syllables the tests draw
def _syllables():
    """Every distinct space-separated syllable of the poem, as written (capitals and punctuation kept)."""
    return list(_poem_syllables())


@functools.cache
def _poem_syllables():
    return tuple(sorted({s for line in kieu_lines() for s in line.split()}))


@_per_syllable
def _kinds(syllable):
    """What kind of syllable of the poem this is (a read-only table: it is shared by every call)."""
    word = letters(syllable)
    nfd = unicodedata.normalize("NFD", word)
    return {"dressed": word != syllable, "lettered": any(c in LETTER_MARKS for c in nfd),
            "tone": tone_name(syllable)}


def draw_syllables(kind, seed, n):
    """n syllables of the poem drawn with `seed`: 'plain' (lowercase, no punctuation, no vowel letter's mark, every
    tone present), 'lettered' (ă, â, ê, ô, ơ, ư; punctuation and capitals as found), 'initials' (lowercase, one of
    every initial the poem has), 'special' (gi, qu, a vowel first, punctuation and capitals)."""
    rng = random.Random(seed)
    pool = _syllables()
    if kind == "plain":
        chosen = [s for s in pool if not _kinds(s)["dressed"] and not _kinds(s)["lettered"]]
        by_tone = {t: [s for s in chosen if tone_name(s) == t] for t in MARK_WORDS}
        picked = [rng.choice(group) for group in by_tone.values() for _ in range(2)]
        return picked + rng.sample(chosen, n - len(picked))
    if kind == "lettered":
        chosen = [s for s in pool if _kinds(s)["lettered"]]
        marks = {m: [s for s in chosen if m in unicodedata.normalize("NFD", s) and tone_name(s) == "ngang"]
                 for m in LETTER_MARKS}
        dressed = [s for s in chosen if _kinds(s)["dressed"]]
        picked = [rng.choice(group) for group in marks.values() for _ in range(2)] + rng.sample(dressed, 4)
        return picked + rng.sample(chosen, n - len(picked))
    clean = [s for s in pool if not _kinds(s)["dressed"]]
    if kind == "initials":
        by_initial = {}
        for s in clean:
            if not toneless(s).startswith(("gi", "qu")):
                by_initial.setdefault(INITIAL.match(toneless(s)).group(0) or "", []).append(s)
        picked = [rng.choice(group) for _, group in sorted(by_initial.items())]
        return picked + rng.sample([s for group in by_initial.values() for s in group], max(0, n - len(picked)))
    special = [s for s in pool if toneless(s).startswith(("gi", "qu")) or (INITIAL.match(toneless(s)).end() == 0)]
    gi_alone = [s for s in special if toneless(s).startswith("gi") and INITIAL.match(toneless(s)).group(0) == "g"]
    dressed = [s for s in pool if _kinds(s)["dressed"]]
    picked = rng.sample(gi_alone, min(3, len(gi_alone))) + rng.sample(dressed, 6)
    return picked + rng.sample(special, n - len(picked))


# ------------------------------------------------------------------ tone
def _tone_mistake(syllable, dressed_only):
    """The words for tone(syllable) giving `said` where the reference says otherwise."""
    name, kinds = tone_name(syllable), _kinds(syllable)
    nfd = unicodedata.normalize("NFD", letters(syllable))
    if dressed_only:
        return (f"tone('{syllable}') was misread: punctuation around a syllable and capital letters do not change its "
                "tone; read the marks of its letters only")
    if name == "ngang" and kinds["lettered"]:
        mark = next(LETTER_MARKS[c] for c in nfd if c in LETTER_MARKS)
        return (f"{mark} was read as a tone (in '{syllable}'): â, ă, ê, ô, ơ and ư are letters of their own, and only "
                "the five tone marks (grave, acute, hook above, tilde, dot below) decide the tone")
    if name == "huyền":
        return (f"{MARK_WORDS['huyền']} counted as trắc (in '{syllable}'): the grave accent is the level tone huyền, "
                "one of the two bằng tones with ngang")
    if name == "ngang":
        return f"{MARK_WORDS['ngang']} counted as trắc (in '{syllable}'): a syllable without a tone mark is bằng"
    return f"{MARK_WORDS[name]} counted as bằng (in '{syllable}'): sắc, hỏi, ngã and nặng are the trắc tones"


def tones_agree(tone, kind, seed, n=60):
    """tone on n syllables of the poem drawn with `seed` (see draw_syllables), each compared with the reference."""
    wrong = []
    for syllable in draw_syllables(kind, seed, n):
        said = attempt(f"tone('{syllable}')", tone, syllable, hint="tone takes one syllable (a str)")
        check_true(isinstance(said, str) and unicodedata.normalize("NFC", said) in ANSWERS,
                   f"tone('{syllable}') returned {said!r}: return the string 'bằng' or the string 'trắc'")
        if unicodedata.normalize("NFC", said) != reference_tone(syllable):
            wrong.append(syllable)
    if wrong:  # the most telling mistake first: a letter's mark, huyền, then the rest; punctuation when only it
        bare = [s for s in wrong if not _kinds(s)["dressed"]]
        order = sorted(bare or wrong, key=lambda s: (not (tone_name(s) == "ngang" and _kinds(s)["lettered"]),
                                                     tone_name(s) != "huyền"))
        share = f"{len(wrong)} of {n} syllables drawn from the poem got the other tone; "
        check_true(False, share + _tone_mistake(order[0], dressed_only=not bare))


# ------------------------------------------------------------------ rhyme
def _rhyme_mistake(syllable, said):
    """The words for rhyme_part(syllable) giving `said` where the reference says otherwise."""
    word, expected = toneless(syllable), reference_rhyme_part(syllable)
    initial = word[:len(word) - len(expected)]
    nfc = unicodedata.normalize("NFC", said)
    if nfc == expected:
        return (f"rhyme_part('{syllable}') returned decomposed (NFD) text (in '{syllable}'): normalize it back "
                "to NFC")
    if nfc != said.lower() or re.search(r"[^\w]", nfc):
        return (f"punctuation or capitals were kept in the rhyme (in '{syllable}'): read the letters only, "
                "in lowercase")
    if any(c in TONE_OF_MARK for c in unicodedata.normalize("NFD", nfc)):
        return (f"the tone mark was kept in the rhyme (in '{syllable}'): the rhyme part has no tone ('là' and 'ta' "
                "share the rhyme a)")
    drop = "".join(c for c in unicodedata.normalize("NFD", expected) if c not in LETTER_MARKS)
    if nfc != expected and unicodedata.normalize("NFC", drop) == nfc:
        return (f"the marks of the vowel letters were removed (in '{syllable}'): ă, â, ê, ô, ơ and ư are vowels "
                "of their own and stay in the rhyme")
    if initial.startswith("gi") and nfc == word[1:]:
        return (f"'gi' before a vowel is one initial (in '{syllable}'): its i is part of the consonant, not of the "
                "rhyme")
    if initial == "g" and word.startswith("gi") and nfc in (word[2:], ""):
        return (f"in '{syllable}' no other vowel follows 'gi', so its i is the vowel: the initial is g alone and the "
                "rhyme starts at i")
    if initial == "qu" and nfc == word[1:]:
        return f"'qu' is one initial (in '{syllable}'): the u after q belongs to it, not to the rhyme"
    if initial and nfc == word:
        return f"the initial '{initial}' left in the rhyme (in '{syllable}')"
    if initial and word.endswith(nfc) and len(nfc) > len(expected):
        return (f"part of the initial '{initial}' left in the rhyme (in '{syllable}'): remove the longest initial "
                "that matches")
    if word.endswith(nfc) and len(nfc) < len(expected):
        return (f"too much was removed (in '{syllable}'): only the initial consonant goes (the longest of the list "
                "that starts the syllable, none when it starts with a vowel)")
    return f"rhyme_part('{syllable}') is not the syllable's vowels and final without its initial and its tone mark"


def rhymes_agree(rhyme_part, kind, seed, n=60):
    """rhyme_part on n syllables of the poem drawn with `seed`, each compared with the reference."""
    for syllable in draw_syllables(kind, seed, n):
        said = attempt(f"rhyme_part('{syllable}')", rhyme_part, syllable, hint="rhyme_part takes one syllable (a str)")
        check_true(isinstance(said, str), f"rhyme_part('{syllable}') returned {type(said).__name__}: return a str")
        if said != reference_rhyme_part(syllable):
            check_true(False, _rhyme_mistake(syllable, said))


# ------------------------------------------------------------------ the meter of a text
PATTERN = ((1, "bằng"), (3, "trắc"), (5, "bằng"))  # syllables 2, 4, 6 (indexes 1, 3, 5) of each line


def reference_report(lines, tone=reference_tone, part=reference_rhyme_part, over_lines=False, across_breaks=False,
                     tone_index=0, skip_eighth=False, tones_of_all=False, rhyme_at=5, exact=False):
    """The meter of `lines` as the exercise defines it; the keyword arguments give the mistakes the tests name."""
    def same(a, b):
        return part(a) == part(b) if exact else rhyme_sound(part(a)) == rhyme_sound(part(b))

    runs, run = [], []
    for line in [*lines, ""]:
        if line.split():
            run.append(line.split())
        elif run:
            runs.append(run)
            run = []
    couplets = [[(run[i], run[i + 1]) for i in range(0, len(run) - 1, 2)] for run in runs]
    every = [c for run in couplets for c in run]
    chained = [every] if across_breaks else couplets
    kept = [(six, eight) for six, eight in every if len(six) == 6 and len(eight) == 8]
    shaped = [(len(six) == 6 and len(eight) == 8) for six, eight in every]
    pattern = [(i + tone_index, t) for i, t in PATTERN]

    def tones_hold(six, eight):
        if min(len(six), len(eight)) <= max(i for i, _ in pattern) or len(eight) <= 7 + tone_index:
            return False
        return (all(tone(line[i]) == t for line in (six, eight) for i, t in pattern)
                and (skip_eighth or tone(eight[7 + tone_index]) == "bằng"))

    def share(hits, of):
        return (hits / of if of else math.nan, of)

    if over_lines:
        flat = [line for run in runs for line in run]
        counts = share(sum(len(line) in (6, 8) for line in flat), len(flat))
    else:
        counts = share(sum(shaped), len(every))
    judged = every if tones_of_all else kept
    chain = [(a[1], b[0]) for run in chained for a, b in zip(run, run[1:], strict=False)
             if len(a[0]) == 6 and len(a[1]) == 8 and len(b[0]) == 6 and len(b[1]) == 8]
    return {"counts": counts,
            "tones": share(sum(tones_hold(six, eight) for six, eight in judged), len(judged)),
            "rhyme": share(sum(same(six[5], eight[rhyme_at]) for six, eight in kept), len(kept)),
            "chain": share(sum(same(eight[7], six[5]) for eight, six in chain), len(chain))}


def draw_lines(seed, couplets=24):
    """Lines for meter_report: runs of real couplets of the poem (blank lines between runs), with some couplets
    broken the ways a model breaks them: a syllable dropped or added, a tone or a rhyme changed, an odd line."""
    rng = random.Random(seed)
    poem = [line.split() for line in kieu_lines()]
    pool = _syllables()
    start = 2 * rng.randrange(len(poem) // 2 - couplets)
    lines, run_left = [], rng.randint(3, 7)
    for k in range(couplets):
        six, eight = list(poem[start + 2 * k]), list(poem[start + 2 * k + 1])
        roll = rng.random()
        if roll < 0.1:
            del six[rng.randrange(6)]
        elif roll < 0.17:
            eight.insert(rng.randrange(8), rng.choice(pool))
        elif roll < 0.37:  # another syllable at a place the meter reads
            line = rng.choice((six, eight))
            line[rng.choice((0, 1, 2, 3, 4, 5, len(line) - 1))] = rng.choice(pool)
        elif roll < 0.47:  # a trắc 8th syllable
            eight[7] = rng.choice([s for s in pool if reference_tone(s) == "trắc"])
        lines += [" ".join(six), " ".join(eight)]
        run_left -= 1
        if run_left == 0 and k < couplets - 1:
            if rng.random() < 0.4:
                lines.append(" ".join(rng.choice(poem)))  # an odd line at the end of a run: no couplet
            lines.append(rng.choice(("", " ")))
            run_left = rng.randint(3, 7)
    return lines


def own_parts(tone, rhyme_part, syllables):
    """Your tone and rhyme_part on every syllable of the test's lines, as tables: the meter is judged around the parts
    you wrote (the tests of tone and rhyme_part judge them)."""
    tones, parts = {}, {}
    for syllable in sorted(set(syllables)):
        tones[syllable] = attempt(f"tone('{syllable}')", tone, syllable,
                                  hint="tone fails on its own: make the test of tone pass first")
        parts[syllable] = attempt(f"rhyme_part('{syllable}')", rhyme_part, syllable,
                                  hint="rhyme_part fails on its own: make the test of rhyme_part pass first")
        check_true(isinstance(parts[syllable], str), "rhyme_part does not return a str: make the test of rhyme_part "
                                                     "pass first")
    check_true(len({unicodedata.normalize("NFC", str(t)) for t in tones.values()} & set(ANSWERS)) == 2,
               "tone gives every syllable of the test the same answer (or neither 'bằng' nor 'trắc'), so no meter "
               "built on it can be judged: make the test of tone pass first")
    check_true(len({rhyme_sound(p) for p in parts.values()}) > 2,
               "rhyme_part gives the syllables of the test nearly the same rhyme, so no rhyme built on it can be "
               "judged: make the test of rhyme_part pass first")
    return ({s: unicodedata.normalize("NFC", str(t)) for s, t in tones.items()}.__getitem__, parts.__getitem__)


KEYS = ("counts", "tones", "rhyme", "chain")
MISTAKES = {
    "counts": ({"over_lines": True}, "the share is over lines, not couplets: count the couplets (a 6-line and the "
                                     "8-line after it) that keep 6 and 8 syllables, out of all couplets"),
    "tones": ({"tone_index": -1}, "the tones were read one syllable early: syllables 2, 4, 6 and 8 are "
                                  "line.split()[1], [3], [5] and [7]"),
    "chain": ({"across_breaks": True}, "the chain rhyme was counted across a blank line: a blank line ends a text, "
                                       "and the next couplet starts a new chain"),
}
EXTRA_MISTAKES = {
    "tones": (({"skip_eighth": True}, "the 8th syllable of the 8-line was not checked: it must be bằng too"),
              ({"tones_of_all": True}, "the tone share is over every couplet: judge the tones only of the couplets "
                                       "that keep 6 and 8 syllables, and count those")),
    "rhyme": (({"rhyme_at": 7}, "the 6-6 rhyme read the 8th syllable of the 8-line: the 6th syllable of the 6-line "
                                "rhymes with the 6th of the 8-line"),
              ({"exact": True}, "two syllables were taken to rhyme only when their rhyme parts are equal: here they "
                                "rhyme when rhyme_sound gives their rhyme parts the same sound")),
    "chain": (({"exact": True}, "two syllables were taken to rhyme only when their rhyme parts are equal: here they "
                                "rhyme when rhyme_sound gives their rhyme parts the same sound"),),
}


def _same(value, expected):
    return (isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[1], numbers.Integral)
            and value[1] == expected[1] and isinstance(value[0], numbers.Real)
            and (math.isnan(expected[0]) and math.isnan(value[0]) or abs(value[0] - expected[0]) < 1e-9))


def meter_agrees(meter_report, tone, rhyme_part, keys, seed, lines=None):
    """meter_report on lines drawn with `seed` (or given), its entries `keys` compared with the reference, computed
    with the reference's tone and rhyme part and, if that disagrees, with yours (see own_parts)."""
    lines = draw_lines(seed) if lines is None else lines
    report = attempt("meter_report(lines)", meter_report, lines,
                     hint="lines is a list of str, some of them blank, some with fewer or more syllables than 6 or 8; "
                          "syllable 2 of a line is line.split()[1], and only couplets keeping 6 and 8 are read")
    check_true(isinstance(report, dict), f"meter_report returned {type(report).__name__}: return a dict")
    for key in keys:
        check_true(key in report, f"meter_report's dict has no entry '{key}'")
        value = report[key]
        check_true(isinstance(value, (tuple, list)) and len(value) == 2,
                   f"meter_report(lines)['{key}'] is {value!r}: make it a pair (share, number of couplets it is of)")
    expected = reference_report(lines)
    if all(_same(report[key], expected[key]) for key in keys):
        return report
    parts = own_parts(tone, rhyme_part, [s for line in lines for s in line.split()])
    around_yours = reference_report(lines, *parts)
    for key in keys:
        if _same(report[key], expected[key]) or _same(report[key], around_yours[key]):
            continue
        named = [MISTAKES[key]] if key in MISTAKES else []
        for flags, words in [*named, *EXTRA_MISTAKES.get(key, ())]:
            if _same(report[key], reference_report(lines, *parts, **flags)[key]):
                check_true(False, f"meter_report(lines)['{key}']: {words}")
        pairing = ("lines pair up as (1st, 2nd), (3rd, 4th), ... within each text (blank lines separate texts, and an "
                   "odd last line of a text is left out)")
        if report[key][1] != expected[key][1] and key != "chain":
            check_true(False, f"meter_report(lines)['{key}'] is a share of the wrong number of couplets: {pairing}")
        if report[key][1] != expected[key][1]:
            check_true(False, f"meter_report(lines)['{key}'] is a share of the wrong number of pairs of consecutive "
                              f"couplets: {pairing}")
        if key != "chain":
            check_true(False, f"meter_report(lines)['{key}'] holds the wrong share of its {report[key][1]} couplets")
        check_true(False, f"meter_report(lines)['{key}'] holds the wrong share of its {report[key][1]} pairs of "
                          "consecutive couplets")
    return report
