"""Plain helpers that several test files share (fixtures live in ``tests/conftest.py``).

Test files import from here, never from one another (``tests/test_suite_layout.py`` checks that).
"""
