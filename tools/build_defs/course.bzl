"""What this checkout holds: the one constant `./labctl release` changes.

The course repository has solutions/ and tests/, so `lab()` points each lab's :impl at //solutions/<lab>:impl
under --config=solution. The handout (and the grader's tree, which is made from it) has neither; its copy of
this file says False, and :impl is always the student's files there.
"""

HAS_SOLUTIONS = True
