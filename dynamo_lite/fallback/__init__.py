"""What we do not trace and what happens when we cannot: skip rules (skip.py) and the records
of frames that ran eagerly (records.py)."""
