"""``ember.utils.deterministic``: settings of deterministic mode (:func:`ember.use_deterministic_algorithms`).

Attributes:
    fill_uninitialized_memory (bool): while deterministic mode is on, ``ember.empty`` and friends fill
        their memory with NaN (integers: the dtype's largest value) so that results never depend on
        what was there before. Default True; set it to False to skip the fill.
"""

fill_uninitialized_memory = True
