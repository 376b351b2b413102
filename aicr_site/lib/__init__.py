"""Small shared modules, one topic each (see style-examples.md, "No utils.py junk drawer")."""
