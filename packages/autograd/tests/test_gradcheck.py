"""``gradcheck`` and ``gradgradcheck`` themselves: they pass right gradients and catch wrong ones."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.autograd import Function, GradcheckError, gradcheck, gradgradcheck


def _randn(*shape, dtype=ember.float64, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape)
    if dtype.is_complex:
        values = values + 1j * rng.standard_normal(shape)
    return ember.tensor(values, dtype=dtype, requires_grad=True)


class WrongBackward(Function):
    """y = x * x, but backward forgets the factor 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x


class FirstOrderOnly(Function):
    """y = x**3 with a right first derivative whose own derivative is wrong (x is read detached)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach()
        return grad * 3 * x * x


class HolomorphicSquare(Function):
    """z -> z**2 for complex z, with PyTorch's convention: the gradient is ``grad * conj(2 z)``."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad * (2 * z).conj()


class UnconjugatedSquare(HolomorphicSquare):
    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        return grad * 2 * z  # the usual mistake: PyTorch's convention needs conj(f'(z))


class TestGradcheck:
    def test_passes_on_right_gradients(self):
        x = _randn(3)
        y = _randn(3, seed=1)
        assert gradcheck(lambda a, b: a * b.exp() + a, (x, y))

    def test_single_tensor_input(self):
        assert gradcheck(lambda a: (a * a).sum(), _randn(4))

    def test_several_outputs(self):
        assert gradcheck(lambda a, b: (a * b, a.exp()), (_randn(2, 3), _randn(3, seed=2)))

    def test_non_tensor_and_constant_inputs(self):
        c = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
        assert gradcheck(lambda a, k, c: a * k + c * a, (_randn(3), 2.5, c))

    def test_catches_wrong_backward_with_clear_report(self):
        x = _randn(3)
        with pytest.raises(GradcheckError) as info:
            gradcheck(WrongBackward.apply, (x,))
        message = str(info.value)
        assert "Jacobian mismatch for output 0 with respect to input 0" in message
        assert "numerical" in message and "analytical" in message
        # the worst entry: numerical 2x_i against analytical x_i on the diagonal
        xs = x.detach().numpy()
        worst = int(np.argmax(np.abs(xs)))
        assert f"(output element, input element) ({worst}, {worst})" in message

    def test_raise_exception_false_returns_false(self):
        assert gradcheck(WrongBackward.apply, (_randn(3),), raise_exception=False) is False

    def test_error_names_the_wrong_input(self):
        class WrongSecond(Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a * b

            @staticmethod
            def backward(ctx, grad):
                a, b = ctx.saved_tensors
                return grad * b, grad * b  # b's gradient should be grad * a

        with pytest.raises(GradcheckError, match="with respect to input 1"):
            gradcheck(WrongSecond.apply, (_randn(2), _randn(2, seed=3)))

    def test_fast_mode_passes_and_catches(self):
        x = _randn(5)
        assert gradcheck(lambda a: a.exp() * a, (x,), fast_mode=True)
        with pytest.raises(GradcheckError, match="fast mode"):
            gradcheck(WrongBackward.apply, (x,), fast_mode=True)

    def test_complex_holomorphic(self):
        z = _randn(3, dtype=ember.complex128)
        assert gradcheck(HolomorphicSquare.apply, (z,))
        assert gradcheck(HolomorphicSquare.apply, (z,), fast_mode=True)
        assert gradcheck(lambda a: a * a.exp(), (z,))

    def test_complex_catches_missing_conjugate(self):
        z = _randn(3, dtype=ember.complex128)
        with pytest.raises(GradcheckError, match="Jacobian mismatch"):
            gradcheck(UnconjugatedSquare.apply, (z,))
        with pytest.raises(GradcheckError):
            gradcheck(UnconjugatedSquare.apply, (z,), fast_mode=True)

    def test_real_output_of_complex_input(self):
        z = _randn(3, dtype=ember.complex128)
        assert gradcheck(lambda a: (a * a.conj()).real, (z,))

    def test_complex_output_of_real_input(self):
        x = _randn(3)
        w = ember.tensor([1 + 2j, -1j, 0.5], dtype=ember.complex128)
        assert gradcheck(lambda a: a * w, (x,))

    def test_no_input_requiring_grad_raises(self):
        with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
            gradcheck(lambda a: a * 2, (ember.tensor([1.0], dtype=ember.float64),))

    def test_single_precision_warns(self):
        x = ember.tensor([1.0, 2.0], requires_grad=True)
        with pytest.warns(UserWarning, match="not a double precision"):
            gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)

    def test_check_grad_dtypes(self):
        x = _randn(2)
        assert gradcheck(lambda a: a * 3, (x,), check_grad_dtypes=True)

    def test_unsupported_checks_raise(self):
        with pytest.raises(ValueError, match="ember.func"):
            gradcheck(lambda a: a * 2, (_randn(2),), check_forward_ad=True)


class TestGradgradcheck:
    def test_passes_on_right_second_derivatives(self):
        x = _randn(3)
        y = _randn(3, seed=4)
        assert gradgradcheck(lambda a, b: a * a * b.exp(), (x, y))

    def test_given_grad_outputs(self):
        x = _randn(3)
        v = ember.tensor([1.0, -2.0, 0.5], dtype=ember.float64)
        assert gradgradcheck(lambda a: a * a * a, (x,), (v,))

    def test_catches_wrong_double_backward(self):
        x = _randn(3)
        assert gradcheck(FirstOrderOnly.apply, (x,))  # first order is right
        with pytest.raises(GradcheckError, match="Jacobian mismatch"):
            gradgradcheck(FirstOrderOnly.apply, (x,))
        assert gradgradcheck(FirstOrderOnly.apply, (x,), raise_exception=False) is False

    def test_fast_mode(self):
        x = _randn(4)
        assert gradgradcheck(lambda a: a.exp() * a, (x,), fast_mode=True)
        with pytest.raises(GradcheckError):
            gradgradcheck(FirstOrderOnly.apply, (x,), fast_mode=True)

    def test_complex(self):
        z = _randn(2, dtype=ember.complex128)
        assert gradgradcheck(lambda a: a * a * a, (z,))
