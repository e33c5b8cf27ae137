"""ResNet-50 (He et al. 2016, "Deep Residual Learning for Image Recognition", Table 1: 3.8e9 multiply-adds
per 224x224 image), ResNeXt-101 32x4d (Xie et al. 2017, "Aggregated Residual Transformations": 32
groups of width 4 per 64 channels) and SE-ResNeXt-101 32x4d (Hu et al. 2018, "Squeeze-and-Excitation
Networks", as NVIDIA DeepLearningExamples builds it: a 16-unit squeeze on each block's output, fused into
the residual add) in plain torch.nn, for
`distscope estimate --model torch:examples/modules/resnet.py:resnet50` on machines without torchvision.
Bottleneck blocks with the stride on the 3x3 convolution, as torchvision's ResNet v1.5 and NVIDIA's
DeepLearningExamples build them (ResNet-50: 4.1e9 multiply-adds)."""

from __future__ import annotations

import torch
from torch import nn


class SqueezeExcite(nn.Module):
    """Channel attention: the block output's spatial mean through a 16-unit bottleneck and a sigmoid
    (DeepLearningExamples' image_classification/models/common.py SqueezeAndExcitation, squeeze 16)."""

    def __init__(self, channels: int, squeeze: int = 16) -> None:
        super().__init__()
        self.squeeze, self.expand = nn.Linear(channels, squeeze), nn.Linear(squeeze, channels)
        self.relu, self.sigmoid = nn.ReLU(inplace=True), nn.Sigmoid()

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.sigmoid(self.expand(self.relu(self.squeeze(x.mean((2, 3))))))[:, :, None, None]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, groups: int = 1, base_width: int = 64,
                 se: bool = False) -> None:
        super().__init__()
        cout = planes * self.expansion
        width = planes * base_width // 64 * groups
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=groups, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())
        self.relu = nn.ReLU(inplace=True)
        self.se = SqueezeExcite(cout) if se else None

    def forward(self, x):  # type: ignore[no-untyped-def]
        out = self.body(x)
        if self.se is None:
            return self.relu(out + self.skip(x))
        return self.relu(torch.addcmul(self.skip(x), out, self.se(out)))


def _resnet(blocks: tuple[int, ...], groups: int = 1, base_width: int = 64, num_classes: int = 1000,
            se: bool = False) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = 64
    for planes, n, stride in zip((64, 128, 256, 512), blocks, (1, 2, 2, 2), strict=True):
        for i in range(n):
            layers.append(Bottleneck(cin, planes, stride if i == 0 else 1, groups, base_width, se))
            cin = planes * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def resnet50() -> nn.Module:
    return _resnet((3, 4, 6, 3))


def resnext101_32x4d() -> nn.Module:
    return _resnet((3, 4, 23, 3), groups=32, base_width=4)


def se_resnext101_32x4d() -> nn.Module:
    return _resnet((3, 4, 23, 3), groups=32, base_width=4, se=True)
