"""Generative models of the model suite (issue 28), each written once against ``lib`` (``ember`` or ``torch``).

DCGAN's generator and discriminator (two specs), a VAE and a diffusion UNet. As in :mod:`vision`, the
default sizes are shrunk for a 2-core CPU (the specs' ``notes`` say how) and ``build(lib, **sizes)`` and
``inputs(lib, rng, device, **sizes)`` take the same size keywords. A loss that needs a target the model does
not take (the discriminator's labels, the noise a diffusion model predicts) makes a fixed one with ``lib``
ops, the same for every step, library and backend.
"""

from __future__ import annotations

import math

try:  # imported as part of the benchmarks.models package, or with benchmarks/models on sys.path (run.py)
    from .registry import ModelSpec, register
    from .vision import calibrate_batch_norm
except ImportError:
    from registry import ModelSpec, register
    from vision import calibrate_batch_norm


def _normal(lib, rng, device, shape):
    return lib.from_numpy(rng.standard_normal(shape).astype("float32")).to(device)


def _fixed_target(lib, like):
    """A fixed zero-mean, unit-variance pattern shaped like ``like`` (``sqrt(2) sin(0.731 i)`` over the flat
    index): the same for every call, and made with ``lib`` ops, so that a compiled training step traces it."""
    index = lib.arange(like.numel(), dtype=like.dtype, device=like.device)
    return (lib.sin(index * 0.731) * math.sqrt(2.0)).view(like.shape)


def dcgan_init(lib, module):
    """DCGAN's initialisation: conv weights N(0, 0.02), batch-norm weights N(1, 0.02) and biases 0."""
    nn = lib.nn
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


# --------------------------------------------------------------------------- DCGAN


def build_dcgan_generator(lib, nz=32, ngf=16, nc=3, **_):
    """DCGAN's generator (Radford et al. 2016) for 64x64 images: a latent ``(n, nz, 1, 1)`` through five
    ConvTranspose2d layers (batch norm and ReLU between, tanh at the end)."""
    nn = lib.nn

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),  # 1x1 -> 4x4
                nn.BatchNorm2d(ngf * 8),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False),  # -> 8x8
                nn.BatchNorm2d(ngf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # -> 16x16
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),  # -> 32x32
                nn.BatchNorm2d(ngf),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),  # -> 64x64
                nn.Tanh(),
            )
            self.apply(lambda m: dcgan_init(lib, m))

        def forward(self, z):
            return self.main(z)

    return calibrate_batch_norm(lib, Generator(), lib.randn(4, nz, 1, 1))


def generator_inputs(lib, rng, device, batch=4, nz=32, **_):
    return (_normal(lib, rng, device, (batch, nz, 1, 1)),)


def generator_loss(lib, output, inputs):
    """An L1 loss to a fixed target batch in [-1, 1] (a stand-in for the discriminator's judgement, which
    this spec leaves out: the generator's backward is what is exercised)."""
    return lib.nn.functional.l1_loss(output, lib.tanh(_fixed_target(lib, output)))


def build_dcgan_discriminator(lib, ndf=16, nc=3, **_):
    """DCGAN's discriminator for 64x64 images: strided convolutions with LeakyReLU(0.2) and batch norm, a
    4x4 convolution to one logit, and a sigmoid."""
    nn = lib.nn

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),  # 64 -> 32
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),  # -> 16
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),  # -> 8
                nn.BatchNorm2d(ndf * 4),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),  # -> 4
                nn.BatchNorm2d(ndf * 8),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),  # -> 1
                nn.Sigmoid(),
            )
            self.apply(lambda m: dcgan_init(lib, m))

        def forward(self, x):
            return self.main(x).view(-1, 1).squeeze(1)

    return calibrate_batch_norm(lib, Discriminator(), lib.tanh(lib.randn(4, nc, 64, 64)))


def discriminator_inputs(lib, rng, device, batch=4, nc=3, **_):
    return (lib.tanh(_normal(lib, rng, device, (batch, nc, 64, 64))),)


def discriminator_loss(lib, output, inputs):
    """Binary cross-entropy with the first half of the batch labelled real and the rest fake."""
    n = output.shape[0]
    labels = (lib.arange(n, device=output.device) < (n + 1) // 2).to(output.dtype)
    return lib.nn.functional.binary_cross_entropy(output, labels)


# --------------------------------------------------------------------------- VAE


def build_vae(lib, features=784, hidden=400, latent=20, **_):
    """The VAE of Kingma and Welling (2014) as PyTorch's example writes it: an MLP encoder to a mean and a
    log-variance, a reparameterised sample ``mu + eps * std`` (``eps`` from ``randn_like``, so the runner
    seeds both sides alike), an MLP decoder with a sigmoid output. ``forward`` returns
    ``(reconstruction, mu, logvar)``; in eval it decodes ``mu`` instead of a sample."""
    nn = lib.nn

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(features, hidden)
            self.fc21 = nn.Linear(hidden, latent)
            self.fc22 = nn.Linear(hidden, latent)
            self.fc3 = nn.Linear(latent, hidden)
            self.fc4 = nn.Linear(hidden, features)

        def encode(self, x):
            h1 = lib.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = lib.exp(0.5 * logvar)
            eps = lib.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            return lib.sigmoid(self.fc4(lib.relu(self.fc3(z))))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, features))
            # sample in training; the posterior mean in eval, so inference is deterministic
            z = self.reparameterize(mu, logvar) if self.training else mu
            return self.decode(z), mu, logvar

    return VAE()


def vae_inputs(lib, rng, device, batch=32, features=784, **_):
    return (lib.from_numpy(rng.random((batch, features)).astype("float32")).to(device),)


def vae_loss(lib, output, inputs):
    """The negative evidence lower bound: summed binary cross-entropy of the reconstruction plus the KL
    divergence of the posterior from the standard normal, divided by the batch size."""
    recon, mu, logvar = output
    x = inputs[0]
    bce = lib.nn.functional.binary_cross_entropy(recon, x.view(recon.shape), reduction="sum")
    kld = -0.5 * lib.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return (bce + kld) / x.shape[0]


# --------------------------------------------------------------------------- diffusion UNet


def build_diffusion_unet(lib, channels=3, base=32, mults=(1, 2), groups=8, heads=1, dropout=0.1, **_):
    """A DDPM-style noise-prediction UNet (Ho et al. 2020): a sinusoidal time embedding through an MLP, residual
    blocks (GroupNorm, SiLU, 3x3 conv, the time embedding added per channel, dropout), self-attention at the
    lowest resolution, stride-2 downsampling, nearest upsampling, skip concatenation. ``forward(x, t)``
    takes noisy images and int64 timesteps and predicts the noise."""
    nn = lib.nn
    F = nn.functional
    temb_dim = base * 4

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = lib.exp(-math.log(10000.0) * lib.arange(half, dtype=lib.float32, device=t.device) / half)
        args = t.float()[:, None] * freqs[None, :]
        return lib.cat([lib.sin(args), lib.cos(args)], dim=1)

    class ResBlock(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.norm1 = nn.GroupNorm(groups, cin)
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
            self.temb_proj = nn.Linear(temb_dim, cout)
            self.norm2 = nn.GroupNorm(groups, cout)
            self.dropout = nn.Dropout(dropout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, temb):
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
            h = self.conv2(self.dropout(F.silu(self.norm2(h))))
            return self.skip(x) + h

    class AttnBlock(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.norm = nn.GroupNorm(groups, ch)
            self.qkv = nn.Conv2d(ch, 3 * ch, 1)
            self.proj_out = nn.Conv2d(ch, ch, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, 3, heads, c // heads, h * w).unbind(1)
            # (b, heads, d, hw): attention over the h*w positions
            weights = lib.softmax(q.transpose(-1, -2) @ k / math.sqrt(c // heads), dim=-1)
            out = (v @ weights.transpose(-1, -2)).reshape(b, c, h, w)
            return x + self.proj_out(out)

    class Downsample(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.conv = nn.Conv2d(ch, ch, 3, stride=2, padding=1)

        def forward(self, x):
            return self.conv(x)

    class Upsample(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.conv = nn.Conv2d(ch, ch, 3, padding=1)

        def forward(self, x):
            return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))

    class DiffusionUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.time_mlp = nn.Sequential(nn.Linear(base, temb_dim), nn.SiLU(), nn.Linear(temb_dim, temb_dim))
            self.conv_in = nn.Conv2d(channels, base, 3, padding=1)
            widths = [base * m for m in mults]
            self.down = nn.ModuleList()
            self.downsample = nn.ModuleList()
            cin = base
            for i, ch in enumerate(widths):
                self.down.append(ResBlock(cin, ch))
                self.downsample.append(Downsample(ch) if i < len(widths) - 1 else nn.Identity())
                cin = ch
            self.mid1 = ResBlock(cin, cin)
            self.mid_attn = AttnBlock(cin)
            self.mid2 = ResBlock(cin, cin)
            self.up = nn.ModuleList()
            self.upsample = nn.ModuleList()
            for i, ch in reversed(list(enumerate(widths))):
                self.up.append(ResBlock(cin + ch, ch))
                self.upsample.append(Upsample(ch) if i > 0 else nn.Identity())
                cin = ch
            self.norm_out = nn.GroupNorm(groups, cin)
            self.conv_out = nn.Conv2d(cin, channels, 3, padding=1)

        def forward(self, x, t):
            temb = self.time_mlp(timestep_embedding(t, base))
            h = self.conv_in(x)
            skips = []
            for block, down in zip(self.down, self.downsample):
                h = block(h, temb)
                skips.append(h)
                h = down(h)
            h = self.mid2(self.mid_attn(self.mid1(h, temb)), temb)
            for block, up in zip(self.up, self.upsample):
                h = block(lib.cat([h, skips.pop()], dim=1), temb)
                h = up(h)
            return self.conv_out(F.silu(self.norm_out(h)))

    return DiffusionUNet()


def diffusion_inputs(lib, rng, device, batch=2, size=16, channels=3, steps=1000, **_):
    x = _normal(lib, rng, device, (batch, channels, size, size))
    t = lib.from_numpy(rng.integers(0, steps, size=(batch,)).astype("int64")).to(device)
    return x, t


def diffusion_loss(lib, output, inputs):
    """Mean squared error of the predicted noise against a fixed noise-like target (the DDPM simple loss)."""
    return lib.nn.functional.mse_loss(output, _fixed_target(lib, output))


# --------------------------------------------------------------------------- registration


def _specs():
    yield ModelSpec(
        "dcgan_generator",
        "generative",
        build_dcgan_generator,
        generator_inputs,
        generator_loss,
        notes="DCGAN generator for 64x64 images; shrunk for CPU: nz 32 and ngf 16 instead of 100 and 64, "
        "batch 4. Trained alone against a fixed target (L1): no discriminator in the loop.",
        cuda_scale={"nz": 100, "ngf": 64, "batch": 128},
    )
    yield ModelSpec(
        "dcgan_discriminator",
        "generative",
        build_dcgan_discriminator,
        discriminator_inputs,
        discriminator_loss,
        notes="DCGAN discriminator (Sigmoid + BCE) for 64x64 images; shrunk for CPU: ndf 16 instead of 64, batch 4.",
        cuda_scale={"ndf": 64, "batch": 128},
    )
    yield ModelSpec(
        "vae",
        "generative",
        build_vae,
        vae_inputs,
        vae_loss,
        notes="PyTorch example's MLP VAE at full size (784-400-20); samples with randn_like in training "
        "(the runner seeds both runs alike), decodes the mean in eval. Batch 32.",
        cuda_scale={"batch": 128},
    )
    yield ModelSpec(
        "diffusion_unet",
        "generative",
        build_diffusion_unet,
        diffusion_inputs,
        diffusion_loss,
        notes="DDPM-style UNet, two resolutions with self-attention in the middle (DDPM CIFAR: base 128, four "
        "resolutions); shrunk for CPU: base 32, GroupNorm(8), 16x16 images, batch 2.",
        cuda_scale={"base": 128, "mults": (1, 2, 2, 2), "groups": 32, "size": 32, "batch": 32},
    )


for _spec in _specs():
    register(_spec)
