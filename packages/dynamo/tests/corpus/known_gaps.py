"""Corpus entries that fail today for a known gap of ember-dynamo (or of a stage below it), with the cause.

Generated from a run of test_corpus.py without these marks, then read by a person; each key is
``(test, entry, backend or None)``; test_corpus.py marks these strict xfails, so a fixed gap shows as an
XPASS failure and its line is removed. The causes are described in more detail, with the suspected owner,
in /work/notes/prompts4/corpus_findings.md.
"""

KNOWN_GAPS: dict[tuple[str, str, str | None], str] = {
    (
        "test_graph_breaks_as_meant",
        "closures.functools_partial",
        None,
    ): "translator: 3 graph breaks, meant 0: 'creating a partial (a custom __new__ or metaclass)', 'descriptor partial.__call__ (wrapper_descriptor) while tracing', 'descriptor partial.__call__ (wrapper_descriptor) while tracing'",
    (
        "test_graph_breaks_as_meant",
        "containers.defaultdict_counts",
        None,
    ): "translator: 7 graph breaks, meant 0: 'creating a defaultdict (a custom __new__ or metaclass)', 'KeyError 0 while tracing', 'for loop over list_iterator object', 'KeyError 1 while tracing', 'for loop over list_iterator object', 'for loop over ",
    (
        "test_graph_breaks_as_meant",
        "data_dependent.loop_with_tensor_condition",
        None,
    ): "translator: 6 graph breaks, meant 3: 'data-dependent branch: bool() of a tensor reads its value into Python', 'for loop over list_iterator object', 'data-dependent branch: bool() of a tensor reads its value into Python', 'for loop over list_i",
    (
        "test_graph_breaks_as_meant",
        "data_dependent.numpy_round_trip",
        None,
    ): "translator: 4 graph breaks, meant 1: 'Tensor.numpy() leaves the graph', 'descriptor ndarray.copy (method_descriptor) while tracing', 'builtin copy() is not supported while tracing', 'an ember call made a tensor from values that are not consta",
    (
        "test_graph_breaks_as_meant",
        "exceptions.caught_index_error",
        None,
    ): "translator: 1 graph breaks, meant 0: 'list of 1[3] raises IndexError'",
    (
        "test_graph_breaks_as_meant",
        "exceptions.caught_key_error",
        None,
    ): "translator: 1 graph breaks, meant 0: \"KeyError 'b' while tracing\"",
    (
        "test_graph_breaks_as_meant",
        "exceptions.caught_raise_in_helper",
        None,
    ): "translator: 1 graph breaks, meant 0: 'creating exception ValueError (raising is not traced)'",
    (
        "test_compiled_equals_eager",
        "tensor_ops.augmented_assignment_rebinds",
        "aot_eager",
    ): "inductor aot: BackendCompilerFailed: backend='aot_eager' raised: | RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [float32 [4]], which is input 0 of PowBackward0, is at version 4; e",
}
