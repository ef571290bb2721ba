"""Vision models of the model suite (issue 28), each written once against ``lib`` (``ember`` or ``torch``).

The architectures follow the published ones (and torchvision's parameter names where torchvision has the
model). The default sizes are shrunk for a 2-core CPU (one eager step near 100 ms or less; each spec's
``notes`` say how); ``build(lib, **sizes)`` and ``inputs(lib, rng, device, **sizes)`` take the same size
keywords, so the published sizes are a keyword away (e.g. ``build_resnet50(lib, width=64, layers=(3, 4, 6, 3),
classes=1000, size=224)``).
"""

from __future__ import annotations

import math

try:  # imported as part of the benchmarks.models package, or with benchmarks/models on sys.path (run.py)
    from .registry import ModelSpec, register
except ImportError:
    from registry import ModelSpec, register


# --------------------------------------------------------------------------- shared pieces


def images(lib, rng, device, batch, size, channels=3):
    """A batch of standard-normal images ``(batch, channels, size, size)``, float32, on ``device``."""
    values = rng.standard_normal((batch, channels, size, size)).astype("float32")
    return lib.from_numpy(values).to(device)


def classification_inputs(image_size, channels=3):
    """An ``inputs`` function for a classifier: one image batch (the labels come from :func:`classification_loss`)."""

    def inputs(lib, rng, device, batch=2, size=image_size, **_):
        return (images(lib, rng, device, batch, size, channels),)

    return inputs


def classification_loss(lib, output, inputs):
    """Cross-entropy of the logits against labels fixed by the batch size (``7 i mod classes`` for sample ``i``),
    made with ``lib`` ops so that a compiled training step traces them instead of breaking on numpy."""
    n, classes = output.shape
    target = lib.arange(n, device=output.device) * 7 % classes
    return lib.nn.functional.cross_entropy(output, target)


def make_divisible(value, divisor=8, min_value=None):
    """``value`` rounded to the nearest multiple of ``divisor``, never more than 10% below it (MobileNet's rule)."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_init(lib, model, linear="normal"):
    """torchvision's initialisation of its CNNs: convolutions Kaiming-normal (fan-out), norm layers 1 and 0;
    linear layers N(0, 0.01) (``"normal"``), uniform in +-1/sqrt(out_features) (``"uniform"``, EfficientNet)
    or left at their default (``None``, ResNet). Without it a deep net's eval-mode outputs shrink towards the
    head's bias and say little about the layers before it."""
    nn = lib.nn
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear) and linear is not None:
            if linear == "normal":
                nn.init.normal_(module.weight, 0.0, 0.01)
            else:
                bound = 1.0 / math.sqrt(module.out_features)
                nn.init.uniform_(module.weight, -bound, bound)
            nn.init.zeros_(module.bias)
    return model


def calibrate_batch_norm(lib, model, *batch, passes=2):
    """Fill ``model``'s batch-norm running statistics from ``passes`` forward passes over ``batch`` (cumulative
    averages), as training would have, and return the model (in training mode). A freshly initialised net in
    eval mode normalises with mean 0 and variance 1, and its activations shrink layer by layer (MobileNet's
    depthwise convolutions by ~10x a block), so its eval output would be the head's bias; calibrated, it
    depends on every layer, which is what an inference check compares."""
    norms = [m for m in model.modules() if isinstance(m, lib.nn.BatchNorm2d)]
    momenta = [m.momentum for m in norms]
    for norm in norms:
        norm.momentum = None
    model.train()
    with lib.no_grad():
        for _ in range(passes):
            model(*batch)
    for norm, momentum in zip(norms, momenta):
        norm.momentum = momentum
    return model


def conv_bn_act(lib, cin, cout, kernel=3, stride=1, groups=1, act=None):
    """Conv2d (no bias, "same" padding) -> BatchNorm2d -> activation module (``act`` a class, None for none)."""
    nn = lib.nn
    layers = [
        nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act(inplace=True) if act in (nn.ReLU, nn.ReLU6, nn.Hardswish, nn.SiLU) else act())
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------- MLP


def build_mlp(lib, in_features=784, hidden=512, classes=10, dropout=0.2, **_):
    """The classic MNIST MLP: two hidden ReLU layers with dropout."""
    nn = lib.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(in_features, hidden)
            self.fc2 = nn.Linear(hidden, hidden)
            self.fc3 = nn.Linear(hidden, classes)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            x = self.flatten(x)
            x = self.dropout(lib.relu(self.fc1(x)))
            x = self.dropout(lib.relu(self.fc2(x)))
            return self.fc3(x)

    return MLP()


def mlp_inputs(lib, rng, device, batch=64, **_):
    return (images(lib, rng, device, batch, 28, channels=1),)


# --------------------------------------------------------------------------- the demo's CNN


def build_digits_cnn(lib, classes=10, dropout=0.25, **_):
    """examples/digits_cnn.py's network: two 3x3 conv-BN-ReLU, a 2x2 max pool, a two-layer classifier."""
    nn = lib.nn

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 32, 3, padding=1, bias=False),
                nn.BatchNorm2d(32),
                nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, 3, padding=1, bias=False),
                nn.BatchNorm2d(64),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            )
            self.classifier = nn.Sequential(
                nn.Flatten(),
                nn.Dropout(dropout),
                nn.Linear(64 * 4 * 4, 128),
                nn.ReLU(inplace=True),
                nn.Dropout(dropout),
                nn.Linear(128, classes),
            )

        def forward(self, x):
            return self.classifier(self.features(x))

    return calibrate_batch_norm(lib, DigitsCNN(), lib.randn(16, 1, 8, 8))


def digits_inputs(lib, rng, device, batch=64, **_):
    return (images(lib, rng, device, batch, 8, channels=1),)


# --------------------------------------------------------------------------- ResNet-18 / ResNet-50


def build_resnet(lib, bottleneck, layers, width=16, classes=100, size=64, **_):
    """A ResNet (He et al. 2016) with torchvision's structure and names: a 7x7 stem and max pool, four stages
    of basic (ResNet-18/34) or bottleneck (ResNet-50+) blocks with projection shortcuts, global average pool
    and a linear head; ``width`` is the first stage's width (64 in the paper)."""
    nn = lib.nn

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, cin, planes, stride, downsample):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride, downsample):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    block = Bottleneck if bottleneck else BasicBlock

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = width
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = self._make_layer(width, layers[0], 1)
            self.layer2 = self._make_layer(width * 2, layers[1], 2)
            self.layer3 = self._make_layer(width * 4, layers[2], 2)
            self.layer4 = self._make_layer(width * 8, layers[3], 2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(width * 8 * block.expansion, classes)

        def _make_layer(self, planes, blocks, stride):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion),
                )
            stage = [block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * block.expansion
            stage += [block(self.inplanes, planes, 1, None) for _ in range(1, blocks)]
            return nn.Sequential(*stage)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = lib.flatten(self.avgpool(x), 1)
            return self.fc(x)

    return calibrate_batch_norm(lib, conv_init(lib, ResNet(), linear=None), lib.randn(2, 3, size, size))


def build_resnet18(lib, width=16, classes=100, size=64, **_):
    return build_resnet(lib, False, (2, 2, 2, 2), width, classes, size)


def build_resnet50(lib, width=16, classes=100, layers=(1, 2, 2, 1), size=64, **_):
    return build_resnet(lib, True, tuple(layers), width, classes, size)


# --------------------------------------------------------------------------- MobileNetV2


def build_mobilenet_v2(lib, width_mult=0.5, classes=100, dropout=0.2, size=64, **_):
    """MobileNetV2 (Sandler et al. 2018), torchvision's layout: inverted residual blocks (1x1 expansion,
    3x3 depthwise, linear 1x1 projection, ReLU6), a residual add where stride is 1 and widths match."""
    nn = lib.nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand_ratio):
            super().__init__()
            hidden = int(round(cin * expand_ratio))
            self.use_res_connect = stride == 1 and cin == cout
            layers = []
            if expand_ratio != 1:
                layers.append(conv_bn_act(lib, cin, hidden, 1, act=nn.ReLU6))
            layers += [
                conv_bn_act(lib, hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                nn.Conv2d(hidden, cout, 1, bias=False),
                nn.BatchNorm2d(cout),
            ]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            if self.use_res_connect:
                return x + self.conv(x)
            return self.conv(x)

    # (expansion t, channels c, repeats n, first stride s), from the paper's table 2
    setting = [
        [1, 16, 1, 1],
        [6, 24, 2, 2],
        [6, 32, 3, 2],
        [6, 64, 4, 2],
        [6, 96, 3, 1],
        [6, 160, 3, 2],
        [6, 320, 1, 1],
    ]

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            cin = make_divisible(32 * width_mult)
            self.last_channel = make_divisible(1280 * max(1.0, width_mult))
            features = [conv_bn_act(lib, 3, cin, 3, 2, act=nn.ReLU6)]
            for t, c, n, s in setting:
                cout = make_divisible(c * width_mult)
                for i in range(n):
                    features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
            features.append(conv_bn_act(lib, cin, self.last_channel, 1, act=nn.ReLU6))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(self.last_channel, classes))

        def forward(self, x):
            x = self.features(x)
            x = nn.functional.adaptive_avg_pool2d(x, (1, 1))
            return self.classifier(lib.flatten(x, 1))

    return calibrate_batch_norm(lib, conv_init(lib, MobileNetV2()), lib.randn(2, 3, size, size))


# --------------------------------------------------------------------------- MobileNetV3-small


class _SqueezeExcitation:
    """Factory for a squeeze-and-excitation module of ``lib`` (shared by MobileNetV3 and EfficientNet)."""

    @staticmethod
    def make(lib, channels, squeeze, activation, scale_activation):
        nn = lib.nn

        class SqueezeExcitation(nn.Module):
            def __init__(self):
                super().__init__()
                self.avgpool = nn.AdaptiveAvgPool2d(1)
                self.fc1 = nn.Conv2d(channels, squeeze, 1)
                self.fc2 = nn.Conv2d(squeeze, channels, 1)
                self.activation = activation()
                self.scale_activation = scale_activation()

            def forward(self, x):
                scale = self.avgpool(x)
                scale = self.scale_activation(self.fc2(self.activation(self.fc1(scale))))
                return scale * x

        return SqueezeExcitation()


def build_mobilenet_v3_small(lib, width_mult=0.5, classes=100, dropout=0.2, size=64, **_):
    """MobileNetV3-Small (Howard et al. 2019): inverted residuals with 3x3/5x5 depthwise convolutions,
    hardswish in the later blocks, squeeze-and-excitation gated by hardsigmoid, a hardswish head."""
    nn = lib.nn

    class InvertedResidual(nn.Module):
        def __init__(self, cin, kernel, expanded, cout, use_se, act, stride):
            super().__init__()
            self.use_res_connect = stride == 1 and cin == cout
            layers = []
            if expanded != cin:
                layers.append(conv_bn_act(lib, cin, expanded, 1, act=act))
            layers.append(conv_bn_act(lib, expanded, expanded, kernel, stride, groups=expanded, act=act))
            if use_se:
                squeeze = make_divisible(expanded // 4, 8)
                layers.append(_SqueezeExcitation.make(lib, expanded, squeeze, nn.ReLU, nn.Hardsigmoid))
            layers.append(conv_bn_act(lib, expanded, cout, 1, act=None))
            self.block = nn.Sequential(*layers)

        def forward(self, x):
            out = self.block(x)
            if self.use_res_connect:
                out += x
            return out

    RE, HS = nn.ReLU, nn.Hardswish
    # (kernel, expanded, out, squeeze-excite, activation, stride), the paper's table 2
    setting = [
        (3, 16, 16, True, RE, 2),
        (3, 72, 24, False, RE, 2),
        (3, 88, 24, False, RE, 1),
        (5, 96, 40, True, HS, 2),
        (5, 240, 40, True, HS, 1),
        (5, 240, 40, True, HS, 1),
        (5, 120, 48, True, HS, 1),
        (5, 144, 48, True, HS, 1),
        (5, 288, 96, True, HS, 2),
        (5, 576, 96, True, HS, 1),
        (5, 576, 96, True, HS, 1),
    ]

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            cin = make_divisible(16 * width_mult)
            layers = [conv_bn_act(lib, 3, cin, 3, 2, act=HS)]
            for kernel, expanded, cout, use_se, act, stride in setting:
                expanded, cout = make_divisible(expanded * width_mult), make_divisible(cout * width_mult)
                layers.append(InvertedResidual(cin, kernel, expanded, cout, use_se, act, stride))
                cin = cout
            last_conv = 6 * cin
            layers.append(conv_bn_act(lib, cin, last_conv, 1, act=HS))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            last_channel = make_divisible(1024 * width_mult)
            self.classifier = nn.Sequential(
                nn.Linear(last_conv, last_channel),
                nn.Hardswish(inplace=True),
                nn.Dropout(dropout, inplace=True),
                nn.Linear(last_channel, classes),
            )

        def forward(self, x):
            x = self.avgpool(self.features(x))
            return self.classifier(lib.flatten(x, 1))

    return calibrate_batch_norm(lib, conv_init(lib, MobileNetV3()), lib.randn(2, 3, size, size))


# --------------------------------------------------------------------------- EfficientNet-B0


def build_efficientnet_b0(
    lib, width_mult=0.5, depth_mult=0.5, classes=100, dropout=0.2, stochastic_depth=0.2, size=64, **_
):
    """EfficientNet-B0 (Tan and Le 2019): MBConv blocks (expansion, depthwise conv, squeeze-and-excitation,
    projection) with SiLU, and stochastic depth on the residual branch in training (its drop probability rising
    linearly with depth, off in eval)."""
    nn = lib.nn

    class StochasticDepth(nn.Module):
        """Drops the whole residual branch of a sample with probability ``p`` in training ("row" mode)."""

        def __init__(self, p):
            super().__init__()
            self.p = p

        def forward(self, x):
            if not self.training or self.p == 0.0:
                return x
            survival = 1.0 - self.p
            noise = lib.empty([x.shape[0]] + [1] * (x.ndim - 1), dtype=x.dtype, device=x.device)
            noise = noise.bernoulli_(survival).div_(survival)
            return x * noise

    class MBConv(nn.Module):
        def __init__(self, cin, cout, kernel, stride, expand_ratio, drop):
            super().__init__()
            self.use_res_connect = stride == 1 and cin == cout
            expanded = make_divisible(cin * expand_ratio)
            layers = []
            if expanded != cin:
                layers.append(conv_bn_act(lib, cin, expanded, 1, act=nn.SiLU))
            layers.append(conv_bn_act(lib, expanded, expanded, kernel, stride, groups=expanded, act=nn.SiLU))
            layers.append(_SqueezeExcitation.make(lib, expanded, max(1, cin // 4), nn.SiLU, nn.Sigmoid))
            layers.append(conv_bn_act(lib, expanded, cout, 1, act=None))
            self.block = nn.Sequential(*layers)
            self.stochastic_depth = StochasticDepth(drop)

        def forward(self, x):
            out = self.block(x)
            if self.use_res_connect:
                out = self.stochastic_depth(out)
                out += x
            return out

    # (expand ratio, kernel, stride, in, out, layers), the paper's table 1
    setting = [
        (1, 3, 1, 32, 16, 1),
        (6, 3, 2, 16, 24, 2),
        (6, 5, 2, 24, 40, 2),
        (6, 3, 2, 40, 80, 3),
        (6, 5, 1, 80, 112, 3),
        (6, 5, 2, 112, 192, 4),
        (6, 3, 1, 192, 320, 1),
    ]

    def width(c):
        return make_divisible(c * width_mult)

    def depth(n):
        return int(math.ceil(n * depth_mult))

    class EfficientNet(nn.Module):
        def __init__(self):
            super().__init__()
            layers = [conv_bn_act(lib, 3, width(32), 3, 2, act=nn.SiLU)]
            total = sum(depth(row[5]) for row in setting)
            index = 0
            for expand, kernel, stride, cin, cout, repeats in setting:
                stage = []
                for i in range(depth(repeats)):
                    drop = stochastic_depth * index / total
                    cin_i = width(cin) if i == 0 else width(cout)
                    stage.append(MBConv(cin_i, width(cout), kernel, stride if i == 0 else 1, expand, drop))
                    index += 1
                layers.append(nn.Sequential(*stage))
            last = 4 * width(320)
            layers.append(conv_bn_act(lib, width(320), last, 1, act=nn.SiLU))
            self.features = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(dropout, inplace=True), nn.Linear(last, classes))

        def forward(self, x):
            x = self.avgpool(self.features(x))
            return self.classifier(lib.flatten(x, 1))

    return calibrate_batch_norm(lib, conv_init(lib, EfficientNet(), linear="uniform"), lib.randn(2, 3, size, size))


# --------------------------------------------------------------------------- ViT


def build_vit(lib, image=32, patch=4, dim=64, depth=4, heads=4, mlp_dim=128, classes=10, dropout=0.0, **_):
    """A Vision Transformer (Dosovitskiy et al. 2021) as torchvision writes ViT-B/16: a strided-conv patch
    embedding, a class token, learned position embeddings, pre-LN encoder blocks (nn.MultiheadAttention,
    GELU MLP) and a linear head on the class token."""
    nn = lib.nn
    if image % patch:
        raise ValueError(f"image size {image} is not a multiple of the patch size {patch}")
    tokens = (image // patch) ** 2 + 1

    class EncoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
            self.self_attention = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
            self.dropout = nn.Dropout(dropout)
            self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(
                nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(mlp_dim, dim), nn.Dropout(dropout)
            )

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.self_attention(y, y, y, need_weights=False)
            x = x + self.dropout(y)
            return x + self.mlp(self.ln_2(x))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos_embedding = nn.Parameter(lib.empty(1, tokens, dim).normal_(std=0.02))
            self.dropout = nn.Dropout(dropout)
            self.layers = nn.Sequential(*[EncoderBlock() for _ in range(depth)])
            self.ln = nn.LayerNorm(dim, eps=1e-6)

        def forward(self, x):
            return self.ln(self.layers(self.dropout(x + self.pos_embedding)))

    class VisionTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv_proj = nn.Conv2d(3, dim, patch, patch)
            self.class_token = nn.Parameter(lib.zeros(1, 1, dim))
            self.encoder = Encoder()
            self.heads = nn.Linear(dim, classes)

        def forward(self, x):
            n, _, h, w = x.shape
            if h != image or w != image:
                raise ValueError(f"expected {image}x{image} images, got {h}x{w}")
            x = self.conv_proj(x)  # (n, dim, h / patch, w / patch)
            x = x.reshape(n, dim, -1).permute(0, 2, 1)  # (n, patches, dim)
            x = lib.cat([self.class_token.expand(n, -1, -1), x], dim=1)
            x = self.encoder(x)
            return self.heads(x[:, 0])

    return VisionTransformer()


# --------------------------------------------------------------------------- U-Net


def build_unet(lib, channels=3, classes=2, base=8, size=64, **_):
    """U-Net (Ronneberger et al. 2015) in its common PyTorch form: double 3x3 conv-BN-ReLU blocks, four
    max-pool downsamplings, four ConvTranspose2d upsamplings whose output is padded to the skip's size and
    concatenated with it, and a 1x1 output convolution."""
    nn = lib.nn
    F = nn.functional

    class DoubleConv(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.double_conv = nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
            )

        def forward(self, x):
            return self.double_conv(x)

    class Down(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout))

        def forward(self, x):
            return self.maxpool_conv(x)

    class Up(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
            self.conv = DoubleConv(cin, cout)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            # the skip may be a pixel larger where a pooled size was odd
            dy = x2.size()[2] - x1.size()[2]
            dx = x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
            return self.conv(lib.cat([x2, x1], dim=1))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = DoubleConv(channels, base)
            self.down1 = Down(base, base * 2)
            self.down2 = Down(base * 2, base * 4)
            self.down3 = Down(base * 4, base * 8)
            self.down4 = Down(base * 8, base * 16)
            self.up1 = Up(base * 16, base * 8)
            self.up2 = Up(base * 8, base * 4)
            self.up3 = Up(base * 4, base * 2)
            self.up4 = Up(base * 2, base)
            self.outc = nn.Conv2d(base, classes, 1)

        def forward(self, x):
            x1 = self.inc(x)
            x2 = self.down1(x1)
            x3 = self.down2(x2)
            x4 = self.down3(x3)
            x5 = self.down4(x4)
            x = self.up1(x5, x4)
            x = self.up2(x, x3)
            x = self.up3(x, x2)
            x = self.up4(x, x1)
            return self.outc(x)

    # random images carry no more statistics at 256 pixels than at 64: calibrate on at most 64x64 (a GPU-sized
    # U-Net's calibration at full size takes seconds on the CPU, for each of the runner's four builds)
    calibration = min(size, 64)
    return calibrate_batch_norm(lib, UNet(), lib.randn(1, channels, calibration, calibration))


def unet_inputs(lib, rng, device, batch=1, size=64, channels=3, **_):
    return (images(lib, rng, device, batch, size, channels),)


def segmentation_loss(lib, output, inputs):
    """Per-pixel cross-entropy against a fixed label map (stripes of 7 pixels, cycling through the classes)."""
    n, c, h, w = output.shape
    labels = (lib.arange(n * h * w, device=output.device) // 7 % c).view(n, h, w)
    return lib.nn.functional.cross_entropy(output, labels)


# --------------------------------------------------------------------------- registration


def _specs():
    yield ModelSpec(
        "mlp",
        "vision",
        build_mlp,
        mlp_inputs,
        classification_loss,
        notes="784-512-512-10 with dropout 0.2, full size (28x28 inputs, batch 64).",
        cuda_scale={"batch": 512},
    )
    yield ModelSpec(
        "digits_cnn",
        "vision",
        build_digits_cnn,
        digits_inputs,
        classification_loss,
        notes="examples/digits_cnn.py's network, full size (8x8 digits, batch 64).",
        cuda_scale={"batch": 512},
    )
    yield ModelSpec(
        "resnet18",
        "vision",
        build_resnet18,
        classification_inputs(64),
        classification_loss,
        notes="ResNet-18, torchvision layout; shrunk for CPU: widths /4 (16-128), 64x64 images, 100 classes, batch 2.",
        cuda_scale={"width": 64, "classes": 1000, "size": 128, "batch": 32},
    )
    yield ModelSpec(
        "resnet50",
        "vision",
        build_resnet50,
        classification_inputs(64),
        classification_loss,
        notes="ResNet-50 (bottleneck blocks), torchvision layout; shrunk for CPU: widths /4, blocks (1,2,2,1) "
        "instead of (3,4,6,3), 64x64 images, 100 classes, batch 2.",
        cuda_scale={"width": 64, "layers": (3, 4, 6, 3), "classes": 1000, "size": 128, "batch": 32},
    )
    yield ModelSpec(
        "mobilenet_v2",
        "vision",
        build_mobilenet_v2,
        classification_inputs(64),
        classification_loss,
        notes="MobileNetV2, torchvision layout; shrunk for CPU: width multiplier 0.5, 64x64 images, 100 classes, "
        "batch 2. Its early batch-norm gradients at batch 2 are ill-conditioned (a one-ulp change of the weights "
        "moves some by 2e-3 relative) and its 5-step losses drift by ~3% of the first under rounding alone.",
        cuda_scale={"width_mult": 1.0, "classes": 1000, "size": 128, "batch": 32},
    )
    yield ModelSpec(
        "mobilenet_v3_small",
        "vision",
        build_mobilenet_v3_small,
        classification_inputs(64),
        classification_loss,
        notes="MobileNetV3-Small (hardswish, squeeze-excite), torchvision layout; shrunk for CPU: width "
        "multiplier 0.5, 64x64 images, 100 classes, batch 2.",
        cuda_scale={"width_mult": 1.0, "classes": 1000, "size": 128, "batch": 32},
    )
    yield ModelSpec(
        "efficientnet_b0",
        "vision",
        build_efficientnet_b0,
        classification_inputs(64),
        classification_loss,
        notes="EfficientNet-B0 (MBConv, SiLU, SE, stochastic depth 0.2 in training); shrunk for CPU: "
        "width and depth multipliers 0.5, 64x64 images, 100 classes, batch 2. Its 5-step training losses "
        "(momentum 0.9, one repeated batch) drift apart by float rounding alone (~3e-3 of the first by step 5).",
        cuda_scale={"width_mult": 1.0, "depth_mult": 1.0, "classes": 1000, "size": 128, "batch": 32},
    )
    yield ModelSpec(
        "vit",
        "vision",
        build_vit,
        vit_inputs,
        classification_loss,
        notes="ViT-B/16 layout (class token, position embedding, nn.MultiheadAttention); shrunk for CPU: "
        "32x32 images, 4x4 patches, width 64, 4 blocks of 4 heads, MLP 128, 10 classes, batch 4.",
        cuda_scale={"image": 224, "patch": 16, "dim": 384, "depth": 12, "heads": 6, "mlp_dim": 1536, "classes": 1000,
                    "batch": 32},
    )
    yield ModelSpec(
        "unet",
        "vision",
        build_unet,
        unet_inputs,
        segmentation_loss,
        notes="U-Net with ConvTranspose2d and skip concatenation, padded to the skip's size; shrunk for CPU: "
        "base width 8 instead of 64, 64x64 images instead of 572x572, batch 1.",
        cuda_scale={"base": 64, "size": 256, "batch": 4},
    )


def vit_inputs(lib, rng, device, batch=4, image=32, **_):
    return (images(lib, rng, device, batch, image),)


for _spec in _specs():
    register(_spec)
