"""Wrong tones, rhymes and meter reports (chapter 10, "Did it learn the meter?"), each with its message, and correct
answers written differently that keep full marks.

A mistake in tone or rhyme_part costs that part's tests only (``only=True``): meter_report is judged around the
student's own tone and rhyme_part (instructor/references/lucbat.py, own_parts).
"""

from instructor.zoo import Variant

ASSIGNMENT = "10_tiny_gpt"

TONE_READ = 'marks = [TONE_MARKS[c] for c in unicodedata.normalize("NFD", syllable) if c in TONE_MARKS]'
LEVEL = 'level = not marks or marks[0] == "huyền"  # ngang has no mark'
NO_TONE = 'word = unicodedata.normalize("NFC", "".join(c for c in unicodedata.normalize("NFD", word) if c not in TONE_MARKS))'
GI_RULE = 'if initial == "gi" and word[2:3] not in tuple(VOWELS):  # gì, gìn: the i is the vowel'
TAKE = "            return word[len(initial):]\n"
PATTERN = 'pattern = ((1, "bằng"), (3, "trắc"), (5, "bằng"))'
EIGHTH = '\n                            and tone(eight[7]) == "bằng" for six, eight in kept]),'

VARIANTS = [
    Variant(
        "tone_any_mark",
        "every combining mark is read as a tone: the circumflex, breve and horn of â, ă, ơ ... count as trắc",
        edits={"tone": ((TONE_READ, 'marks = [TONE_MARKS.get(c, "sắc") for c in unicodedata.normalize("NFD", syllable) '
                                    'if unicodedata.combining(c)]'),)},
        expect={"test_tone_letters": "was read as a tone"},
        only=True,
    ),
    Variant(
        "tone_breve_as_tone",
        "the breve of ă is taken for a tone mark (it looks like one)",
        edits={"tone": ((TONE_READ, 'marks = [TONE_MARKS.get(c, "sắc") for c in unicodedata.normalize("NFD", syllable) '
                                    'if c in TONE_MARKS or c == "\\u0306"]'),)},
        expect={"test_tone_letters": "the breve of ă was read as a tone"},
        only=True,
    ),
    Variant(
        "tone_huyen_trac",
        "huyền (the grave accent) is counted as trắc: only a syllable without a mark is taken as bằng",
        edits={"tone": ((LEVEL, "level = not marks"),)},
        expect={"test_tone_marks": "huyền (the grave accent, as in 'là') counted as trắc",
                "test_tone_letters": "counted as trắc"},
        only=True,
    ),
    Variant(
        "tone_nang_missed",
        "the dot below (nặng) is left out of the tone marks: nặng syllables count as bằng",
        edits={"tone": ((TONE_READ, TONE_READ.replace("if c in TONE_MARKS", 'if c in TONE_MARKS and c != "\\u0323"')),)},
        expect={"test_tone_marks": "nặng (the dot below, as in 'mệnh') counted as bằng",
                "test_tone_letters": "counted as bằng"},
        only=True,
    ),
    Variant(
        "tone_last_character",
        "the tone is read from the syllable's last character only (the tone mark sits on a vowel, often not the last)",
        edits={"tone": ((TONE_READ, TONE_READ.replace("unicodedata.normalize(\"NFD\", syllable)",
                                                      "unicodedata.normalize(\"NFD\", syllable[-1:])")),)},
        expect={"test_tone_marks": "counted as bằng", "test_tone_letters": "counted as bằng"},
        only=True,
    ),
    Variant(
        "rhyme_keeps_initial",
        "rhyme_part removes the tone mark but keeps the initial consonant",
        edits={"rhyme_part": ((TAKE, "            return word\n"),)},
        expect={"test_rhyme_initials": "left in the rhyme", "test_rhyme_special": "left in the rhyme"},
        only=True,
    ),
    Variant(
        "rhyme_keeps_tone",
        "rhyme_part keeps the tone mark (the rhyme is read from the NFC letters as they are)",
        edits={"rhyme_part": ((NO_TONE, "word = unicodedata.normalize(\"NFC\", word)"),)},
        expect={"test_rhyme_initials": "the tone mark was kept in the rhyme",
                "test_rhyme_special": "the tone mark was kept in the rhyme"},
        only=True,
    ),
    Variant(
        "rhyme_drops_vowel_marks",
        "rhyme_part drops every combining mark, the circumflex, breve and horn of the vowel letters too",
        edits={"rhyme_part": ((NO_TONE, NO_TONE.replace("if c not in TONE_MARKS", "if not unicodedata.combining(c)")),)},
        expect={"test_rhyme_initials": "the marks of the vowel letters were removed",
                "test_rhyme_special": "the marks of the vowel letters were removed"},
        only=True,
    ),
    Variant(
        "rhyme_shortest_initial",
        "rhyme_part removes the shortest initial that matches (n of nghe, c of chữ) instead of the longest",
        edits={"rhyme_part": (("    for initial in INITIALS:", "    for initial in sorted(INITIALS, key=len):"),)},
        expect={"test_rhyme_initials": "part of the initial", "test_rhyme_special": "initial"},
        only=True,
    ),
    Variant(
        "rhyme_gi_always",
        "gi is always taken as the initial, also in gì and gìn where no other vowel follows it",
        edits={"rhyme_part": ((GI_RULE, 'if initial == "gi" and False:'),)},
        expect={"test_rhyme_special": "no other vowel follows 'gi'"},
        only=True,
    ),
    Variant(
        "rhyme_gi_never",
        "gi is never taken as an initial: only its g is removed, and the i of gia, giữa stays in the rhyme",
        edits={"rhyme_part": ((GI_RULE, 'if initial == "gi":'),)},
        expect={"test_rhyme_special": "'gi' before a vowel is one initial"},
        only=True,
    ),
    Variant(
        "rhyme_qu_as_q",
        "the u of qu is left in the rhyme, as if q alone were the initial",
        edits={"rhyme_part": ((TAKE, '            return word[1:] if initial == "qu" else word[len(initial):]\n'),)},
        expect={"test_rhyme_special": "'qu' is one initial"},
        only=True,
    ),
    Variant(
        "rhyme_keeps_punctuation",
        "rhyme_part keeps the punctuation around a syllable",
        edits={"rhyme_part": (("word = syllable.lower().strip(PUNCTUATION)", "word = syllable.lower()"),)},
        expect={"test_rhyme_special": "punctuation or capitals were kept"},
        only=True,
    ),
    Variant(
        "meter_counts_over_lines",
        "the counts are a share of lines of 6 or 8 syllables, not of couplets keeping 6 then 8",
        edits={"meter_report": (('"counts": share([keeps(couplet) for couplet in every]),',
                                 '"counts": share([len(line) in (6, 8) for text in texts for line in text]),'),)},
        expect={"test_meter_counts": "the share is over lines, not couplets"},
        only=True,
    ),
    Variant(
        "meter_tones_one_early",
        "syllables 2, 4, 6 and 8 are read at indexes 2, 4, 6 and 8 minus 2: line.split()[0], [2], [4] and [6]",
        edits={"meter_report": ((PATTERN, 'pattern = ((0, "bằng"), (2, "trắc"), (4, "bằng"))'),
                                (EIGHTH, '\n                            and tone(eight[6]) == "bằng" for six, eight in kept]),'))},
        expect={"test_meter_tones": "the tones were read one syllable early"},
        only=True,
    ),
    Variant(
        "meter_eighth_unchecked",
        "the tone of syllable 8 of the 8-line is not checked",
        edits={"meter_report": ((EIGHTH, " for six, eight in kept]),"),)},
        expect={"test_meter_tones": "the 8th syllable of the 8-line was not checked"},
        only=True,
    ),
    Variant(
        "meter_rhyme_reads_eighth",
        "the 6-6 rhyme compares the 6th syllable of the 6-line with the 8th of the 8-line",
        edits={"meter_report": (('"rhyme": share([rhymes(six[5], eight[5])', '"rhyme": share([rhymes(six[5], eight[7])'),)},
        expect={"test_meter_rhymes": "the 6-6 rhyme read the 8th syllable"},
        only=True,
    ),
    Variant(
        "meter_chain_across_texts",
        "the chain rhyme links the last couplet of a text to the first of the next",
        edits={"meter_report": (("for text in couplets for first, second in zip(text, text[1:])",
                                 "for first, second in zip(every, every[1:])"),)},
        expect={"test_meter_rhymes": "counted across a blank line"},
        only=True,
    ),
    Variant(
        "meter_exact_rhyme",
        "two syllables rhyme only when their rhyme parts are equal (rhyme_sound not used)",
        edits={"meter_report": (("return rhyme_sound(rhyme_part(a)) == rhyme_sound(rhyme_part(b))",
                                 "return rhyme_part(a) == rhyme_part(b)"),)},
        expect={"test_meter_rhymes": "only when their rhyme parts are equal"},
        only=True,
    ),
    Variant(
        "meter_odd_line_paired",
        "blank lines are skipped, so the lines pair across texts and an odd last line pairs with the next text's first",
        edits={"meter_report": (('for line in [*lines, ""]:', 'for line in [*[line for line in lines if line.split()], ""]:'),)},
        expect={"test_meter_counts": "wrong number of couplets"},
    ),
]

# Correct answers written differently: each must keep full marks.
ALTERNATIVES = [
    Variant(
        "tone_by_character_names",
        "the tone read from the Unicode names of the precomposed letters (a table of words, no decomposition)",
        replace={"tone": '''def tone(syllable):
    for character in syllable:
        name = unicodedata.name(character, "")
        if any(word in name for word in ("ACUTE", "HOOK ABOVE", "TILDE", "DOT BELOW")):
            return "trắc"
    return "bằng"
'''},
    ),
    Variant(
        "rhyme_by_regex",
        "the initial removed with one regular expression, the tone with a translation table of the NFD marks",
        replace={"rhyme_part": '''import re

INITIAL = re.compile(r"(ngh|ng|nh|ch|tr|th|kh|ph|gh|gi(?=[aăâeêioôơuưy])|qu|[bcdđghklmnprstvx])?(.*)")


def rhyme_part(syllable):
    decomposed = unicodedata.normalize("NFD", syllable.lower()).translate({ord(m): None for m in TONE_MARKS})
    word = re.sub(r"[^\\w]", "", unicodedata.normalize("NFC", decomposed))
    return INITIAL.fullmatch(word).group(2)
'''},
    ),
    Variant(
        "meter_by_indexes",
        "meter_report walks the lines with indexes and counters instead of lists of couplets",
        replace={"meter_report": '''def meter_report(lines):
    split = [line.split() for line in lines] + [[]]
    hits = {"counts": 0, "tones": 0, "rhyme": 0, "chain": 0}
    total = {"counts": 0, "tones": 0, "rhyme": 0, "chain": 0}
    i, previous = 0, None  # previous: the 8-line of the last couplet of this text, if it kept the counts
    while i < len(split):
        if not split[i]:
            i, previous = i + 1, None
            continue
        if not split[i + 1]:  # an odd last line
            i, previous = i + 2, None
            continue
        six, eight = split[i], split[i + 1]
        total["counts"] += 1
        if len(six) == 6 and len(eight) == 8:
            hits["counts"] += 1
            total["tones"] += 1
            total["rhyme"] += 1
            beats = [tone(six[1]), tone(six[3]), tone(six[5]), tone(eight[1]), tone(eight[3]), tone(eight[5]), tone(eight[7])]
            hits["tones"] += beats == ["bằng", "trắc", "bằng", "bằng", "trắc", "bằng", "bằng"]
            hits["rhyme"] += rhyme_sound(rhyme_part(six[5])) == rhyme_sound(rhyme_part(eight[5]))
            if previous is not None:
                total["chain"] += 1
                hits["chain"] += rhyme_sound(rhyme_part(previous[7])) == rhyme_sound(rhyme_part(six[5]))
            previous = eight
        else:
            previous = None
        i += 2
    return {key: (hits[key] / total[key] if total[key] else float("nan"), total[key]) for key in hits}
'''},
    ),
]
