"""The references the hidden tests compare with: the grader's side only (docs/AUTHORING.md, "References").

One module per chapter whose hidden tests need more than PyTorch's own layers or a formula written in the
test cell: ``instructor.references.<notebook>`` (``decoder``, ``tiny_gpt``, ``seq2seq_beam_search``, ...).
The hidden tests import them in the grader's process (``c.OracleExecute.test_modules`` lists them, so their
lines may call the student's objects as a test cell's own lines do). They are never in ``course/`` (which
ships to students and is bound into every grading kernel), never in ``release/``, and the grading sandbox
binds only ``course/`` and ``nboracle`` into a kernel: no grading kernel can import them.
``tests/test_references_reach.py`` walks everything ``course`` puts within a kernel's reach and calls it on
the graded functions' inputs: none of it gives a reference's answer.
"""
