"""OpInfos of ember._ops.linalg_misc (composite linalg functions)."""
