"""ember.profiler against torch.profiler: schedules, table columns, op and backward-node names."""

import pytest
import torch
import torch.profiler

import ember
import ember.profiler

pytestmark = pytest.mark.parity


@pytest.mark.parametrize("kwargs", [
    dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=0, active=1, repeat=3),
    dict(wait=2, warmup=0, active=3, repeat=2, skip_first=3),
])
def test_schedule_matches(kwargs):
    ours, theirs = ember.profiler.schedule(**kwargs), torch.profiler.schedule(**kwargs)
    assert [ours(i).name for i in range(25)] == [theirs(i).name for i in range(25)]


def _header(table):
    return [c.strip() for c in table.splitlines()[1].split("  ") if c.strip()]


@pytest.mark.parametrize("options", [{}, {"record_shapes": True}, {"profile_memory": True}])
def test_table_columns_match(options):
    results = []
    for lib in (ember, torch):
        a = lib.ones(3, 3, requires_grad=True)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU], **options) as prof:
            (a * 2).sum().backward()
        results.append(prof)
    group = options.get("record_shapes", False)
    ours, theirs = (p.key_averages(group_by_input_shape=group).table() for p in results)
    assert _header(ours) == _header(theirs)
    names = [{e.key for e in p.key_averages()} for p in results]
    for name in ("aten::mul", "aten::sum", "autograd::engine::evaluate_function: MulBackward0",
                 "autograd::engine::evaluate_function: SumBackward0"):
        assert name in names[0] and name in names[1]


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_optimizer_labels_match(optimizer):
    pytest.importorskip("ember.optim", reason="the optimizers are in ember-autograd")
    labels = []
    for lib in (ember, torch):
        p = lib.ones(3, requires_grad=True)
        opt = getattr(lib.optim, optimizer)([p], lr=0.1)
        p.grad = lib.ones(3)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU]) as prof:
            opt.step()
            opt.zero_grad()
        labels.append({e.key for e in prof.key_averages() if e.key.startswith("Optimizer.")})
    assert labels[0] == labels[1] == {f"Optimizer.step#{optimizer}.step", f"Optimizer.zero_grad#{optimizer}.zero_grad"}
