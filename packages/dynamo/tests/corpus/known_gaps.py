"""Corpus entries that fail today for a known gap of ember-dynamo (or of a stage below it), with the cause.

Written by update_known_gaps.py from runs of test_corpus.py without these marks (Python 3.11, 3.12, 3.13),
then read by a person. Keys are ``(test, entry, backend or None)``; test_corpus.py marks them strict xfails,
so a fixed gap shows as an XPASS failure: run update_known_gaps.py again. :data:`KNOWN_GAPS` holds the gaps
of every version, :data:`KNOWN_GAPS_BY_VERSION` those of one version only.
"""

KNOWN_GAPS: dict[tuple[str, str, str | None], str] = {
    (
        "test_graph_breaks_as_meant",
        "data_dependent.numpy_round_trip",
        None,
    ): "translator: 4 graph breaks, meant 1: 'Tensor.numpy() leaves the graph', 'descriptor ndarray.copy (method_descriptor) while tracing', 'builtin copy() is not supported while tracing', \"passing ndarray object to cal",
}

KNOWN_GAPS_BY_VERSION: dict[str, dict[tuple[str, str, str | None], str]] = {
    "3.11": {},
    "3.12": {},
    "3.13": {},
}
