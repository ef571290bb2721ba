class GradcheckError(RuntimeError):
    pass


def gradcheck(*a, **k):
    raise NotImplementedError


gradgradcheck = gradcheck
