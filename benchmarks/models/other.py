"""Graph, recommender and reinforcement-learning models of the ember.compile model suite.

Each model is written once against ``lib`` (``ember`` or ``torch``) and registered with
:func:`registry.register`; sizes are shrunk so that an eager CPU training step stays around 100 ms on 2 cores.
"""

from __future__ import annotations

import numpy as np
from registry import ModelSpec, register

# ----------------------------------------------------------------------------------------------------------
# GCN (Kipf & Welling 2017) over a sparse normalised adjacency
# ----------------------------------------------------------------------------------------------------------

NODES, FEATURES, CLASSES = 512, 64, 8


def build_gcn(lib, hidden=64, layers=2, **_):
    """Graph convolutions ``H' = relu(A_hat @ H @ W)`` (the last without relu), ``A_hat`` the symmetrically
    normalised adjacency with self-loops, given as a sparse COO tensor and multiplied with ``lib.sparse.mm``."""
    nn = lib.nn
    F = lib.nn.functional

    class GraphConvolution(nn.Module):
        def __init__(self, fan_in, fan_out):
            super().__init__()
            self.linear = nn.Linear(fan_in, fan_out, bias=False)
            self.bias = nn.Parameter(lib.zeros(fan_out))

        def forward(self, x, adjacency):
            return lib.sparse.mm(adjacency, self.linear(x)) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            widths = [FEATURES] + [hidden] * (layers - 1) + [CLASSES]
            self.convs = nn.ModuleList([GraphConvolution(a, b) for a, b in zip(widths[:-1], widths[1:])])

        def forward(self, x, adjacency):
            for i, conv in enumerate(self.convs):
                x = conv(x, adjacency)
                if i < len(self.convs) - 1:
                    x = F.relu(x)
            return x

    return GCN()


def _gcn_inputs(lib, rng, device, nodes=NODES, degree=8, **_):
    """Node features and ``D^-1/2 (A + I) D^-1/2`` of a random undirected graph, as a coalesced sparse tensor."""
    src = rng.integers(0, nodes, size=nodes * degree // 2)
    dst = rng.integers(0, nodes, size=nodes * degree // 2)
    dense = np.zeros((nodes, nodes), dtype=np.float32)
    dense[src, dst] = dense[dst, src] = 1.0
    np.fill_diagonal(dense, 1.0)
    scale = 1.0 / np.sqrt(dense.sum(1))
    dense = dense * scale[:, None] * scale[None, :]
    rows, cols = np.nonzero(dense)
    indices = lib.tensor(np.stack([rows, cols]), dtype=lib.long)
    values = lib.tensor(dense[rows, cols], dtype=lib.float32)
    adjacency = lib.sparse_coo_tensor(indices, values, (nodes, nodes)).coalesce().to(device)
    features = lib.tensor(rng.standard_normal((nodes, FEATURES)), dtype=lib.float32, device=device)
    return features, adjacency


def _node_classification_loss(lib, output, inputs):
    labels = lib.arange(output.size(0), device=output.device) % CLASSES
    return lib.nn.functional.cross_entropy(output, labels)


register(
    ModelSpec(
        name="gcn",
        domain="graph",
        build=build_gcn,
        inputs=_gcn_inputs,
        loss=_node_classification_loss,
        notes="2-layer GCN (64 features, 64 hidden, 8 classes) on a random 512-node graph of mean degree ~8, "
        "adjacency a sparse COO input: one graph in ember.compile (the adjacency an opaque input of the sparse "
        "product, an extern call); torch.compile runs the frame eagerly",
        cuda_scale={"nodes": 4096, "hidden": 256},
    )
)


# ----------------------------------------------------------------------------------------------------------
# DLRM-style recommender: EmbeddingBag tables (sum pooling) + dense MLP + dot interactions + top MLP
# ----------------------------------------------------------------------------------------------------------

TABLES, ROWS, DENSE = 4, 1000, 13


def build_dlrm(lib, dim=16, bottom=(64, 16), top=(64, 32), rows=ROWS, **_):
    """DLRM (Naumov et al. 2019) shrunk: a bottom MLP over the dense features, one ``nn.EmbeddingBag``
    (``mode="sum"``, with offsets) per sparse feature, the pairwise dot products of the vectors, a top MLP
    to one logit."""
    nn = lib.nn

    def mlp(widths, last_activation):
        layers = []
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2 or last_activation:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bottom_mlp = mlp((DENSE, *bottom[:-1], dim), last_activation=True)
            self.embeddings = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(TABLES)])
            pairs = (TABLES + 1) * TABLES // 2
            self.top_mlp = mlp((dim + pairs, *top, 1), last_activation=False)
            left, right = np.tril_indices(TABLES + 1, -1)
            self.register_buffer("left", lib.tensor(left, dtype=lib.long), persistent=False)
            self.register_buffer("right", lib.tensor(right, dtype=lib.long), persistent=False)

        def forward(self, dense, indices, offsets):
            x = self.bottom_mlp(dense)
            vectors = [x] + [bag(indices[t], offsets[t]) for t, bag in enumerate(self.embeddings)]
            stacked = lib.stack(vectors, dim=1)  # (B, TABLES + 1, dim)
            dots = lib.bmm(stacked, stacked.transpose(1, 2))
            interactions = dots[:, self.left, self.right]
            return self.top_mlp(lib.cat([x, interactions], dim=1)).squeeze(1)

    return DLRM()


def _dlrm_inputs(lib, rng, device, batch=128, per_table=384, rows=ROWS, **_):
    """Dense features, and per table ``per_table`` indices cut into ``batch`` bags of random sizes (some empty)."""
    dense = lib.tensor(rng.standard_normal((batch, DENSE)), dtype=lib.float32, device=device)
    indices = lib.tensor(rng.integers(0, rows, size=(TABLES, per_table)), dtype=lib.long, device=device)
    cuts = np.sort(rng.integers(0, per_table + 1, size=(TABLES, batch - 1)), axis=1)
    offsets = np.concatenate([np.zeros((TABLES, 1), dtype=np.int64), cuts], axis=1)
    return dense, indices, lib.tensor(offsets, dtype=lib.long, device=device)


def _click_loss(lib, output, inputs):
    clicks = (lib.arange(output.size(0), device=output.device) % 3 == 0).to(output.dtype)
    return lib.nn.functional.binary_cross_entropy_with_logits(output, clicks)


register(
    ModelSpec(
        name="dlrm",
        domain="recsys",
        build=build_dlrm,
        inputs=_dlrm_inputs,
        loss=_click_loss,
        notes="DLRM-style: 4 EmbeddingBag(1000, 16, mode='sum') tables with offsets (Criteo: 26 tables of "
        "millions of rows), 13 dense features, MLPs 64-16 / 64-32-1, dot interactions; batch 128",
        cuda_scale={"dim": 64, "bottom": (256, 64), "top": (512, 256), "rows": 100_000, "batch": 2048,
                    "per_table": 8192},
    )
)


# ----------------------------------------------------------------------------------------------------------
# Actor-critic policy (CleanRL's PPO/A2C agent for discrete actions)
# ----------------------------------------------------------------------------------------------------------

OBSERVATIONS, ACTIONS = 8, 4


def build_actor_critic(lib, hidden=64, **_):
    """Separate tanh MLPs for the policy logits and the value; ``forward(obs)`` samples actions from
    ``lib.distributions.Categorical`` and returns ``(action, log_prob, entropy, value)`` as CleanRL's
    ``get_action_and_value`` does."""
    nn = lib.nn
    Categorical = lib.distributions.Categorical

    def trunk(out, gain):
        layers = [nn.Linear(OBSERVATIONS, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh()]
        head = nn.Linear(hidden, out)
        nn.init.orthogonal_(head.weight, gain)
        nn.init.zeros_(head.bias)
        return nn.Sequential(*layers, head)

    class Agent(nn.Module):
        def __init__(self):
            super().__init__()
            self.critic = trunk(1, 1.0)
            self.actor = trunk(ACTIONS, 0.01)

        def forward(self, obs):
            distribution = Categorical(logits=self.actor(obs))
            action = distribution.sample()
            return action, distribution.log_prob(action), distribution.entropy(), self.critic(obs).squeeze(-1)

    return Agent()


def _rl_inputs(lib, rng, device, batch=256, **_):
    return (lib.tensor(rng.standard_normal((batch, OBSERVATIONS)), dtype=lib.float32, device=device),)


def _a2c_loss(lib, output, inputs):
    """Advantage actor-critic loss; the returns are a fixed function of the observations."""
    _action, log_prob, entropy, value = output
    returns = inputs[0].sum(-1).tanh()
    advantage = (returns - value).detach()
    policy_loss = -(advantage * log_prob).mean()
    value_loss = 0.5 * ((returns - value) ** 2).mean()
    return policy_loss + 0.5 * value_loss - 0.01 * entropy.mean()


register(
    ModelSpec(
        name="actor_critic",
        domain="rl",
        build=build_actor_critic,
        inputs=_rl_inputs,
        loss=_a2c_loss,
        notes="CleanRL-style discrete actor-critic (two 64-wide tanh MLPs), Categorical sampling in forward, "
        "A2C loss with log_prob and entropy; batch 256 observations of 8 (no environment)",
        cuda_scale={"batch": 4096},
    )
)
