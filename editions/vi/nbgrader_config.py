"""nbgrader configuration of the course's Vietnamese edition (docs/TRANSLATING.md).

Every setting of the English course (nbgrader_config.py at the repository's root: the grading
pipeline, the oracle, the sandbox, the exchange), with this edition's own course id and the
Vietnamese stub of a written answer. Its source/ is generated from the English source and the
catalogs i18n/vi/*.po by `python -m instructor translate --lang vi` (git-ignored: it holds the
solutions and hidden tests, which the English source/ already keeps); its release/ is committed.
"""

import sys as _sys

from instructor.repository import REPO as _REPO

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

# The English course's configuration, loaded once: that file looks for other nbgrader_config.py
# files on Jupyter's path (a shared exchange), and this one, if on that path, must not load it again.
if not getattr(_sys, "_attention_edition_loading", False):
    _sys._attention_edition_loading = True
    try:
        load_subconfig(str(_REPO / "nbgrader_config.py"))  # noqa: F821 (provided by traitlets)
    finally:
        del _sys._attention_edition_loading

c.CourseDirectory.course_id = "attention-transformers-vi"
c.ClearSolutions.text_stub = "CÂU TRẢ LỜI CỦA BẠN Ở ĐÂY"
# Every message a student reads (tests, the grader's notes, the due-date cell, make check's summary)
# in Vietnamese: i18n/vi/messages.po, through the course's catalog (nbgrader_config.py: MessageCatalog).
c.MessageCatalog.language = "vi"
# The feedback page's own words (Score, Test cell, Student's answer) in Vietnamese: nbgrader's template with
# its words from i18n/vi/feedback_page.po, written by `python -m instructor translate --lang vi`.
c.HTMLExporter.template_name = "feedback"
c.HTMLExporter.extra_template_basedirs = [str(_REPO / "editions" / "vi" / "templates")]
