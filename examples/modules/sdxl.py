"""Stable Diffusion XL's denoiser (Podell et al., ICLR'24) and its VAE decoder, built by diffusers from the
public `stabilityai/stable-diffusion-xl-base-1.0` `unet/config.json` and `vae/config.json` (their fields
below; no weights are read), for

    distscope serve diffusion --model torch:examples/modules/sdxl.py:unet \
        --input x:2x4x128x128:fp16,ctx:2x77x2048:fp16 --cluster dgx-a100 --gpus 1,2,4,8

The latent is 1/8 of the image per side (x:2x4x128x128 is one 1024x1024 image; the batch of 2 holds
classifier-free guidance's conditional and unconditional halves); ctx is the two text encoders' 77
tokens of 2048 features. The pooled text embedding and the six size/crop conditioning ids SDXL also
takes are built inside the wrapper (their cost is negligible). `vae_decoder` turns one latent
(z:1x4x128x128) into the image; SDXL's pipeline decodes in fp32 (the VAE's `force_upcast`), so price it
with dtype tf32 (cuDNN convolutions use TF32 by default). Needs diffusers: `pip install 'distscope[diffusion]'`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

SDXL_UNET = {
    "act_fn": "silu", "addition_embed_type": "text_time", "addition_embed_type_num_heads": 64,
    "addition_time_embed_dim": 256, "attention_head_dim": [5, 10, 20], "block_out_channels": [320, 640, 1280],
    "center_input_sample": False, "cross_attention_dim": 2048,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"], "downsample_padding": 1,
    "flip_sin_to_cos": True, "freq_shift": 0, "in_channels": 4, "layers_per_block": 2,
    "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05, "norm_num_groups": 32, "out_channels": 4,
    "projection_class_embeddings_input_dim": 2816, "sample_size": 128, "transformer_layers_per_block": [1, 2, 10],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"], "use_linear_projection": True,
}


# stable-diffusion-xl-base-1.0/vae/config.json (Stable Diffusion 1.x's VAE has the same layers)
SD_VAE = {
    "act_fn": "silu", "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4, "in_channels": 3, "latent_channels": 4, "layers_per_block": 2,
    "norm_num_groups": 32, "out_channels": 3, "up_block_types": ["UpDecoderBlock2D"] * 4,
}


def _diffusers() -> Any:
    try:
        import diffusers
    except ImportError as exc:
        raise ImportError("examples/modules need diffusers for diffusion models: pip install 'distscope[diffusion]'") from exc
    return diffusers


class VAEDecoder(nn.Module):
    """Latent (N×4×h×w) -> image (N×3×8h×8w)."""

    def __init__(self) -> None:
        super().__init__()
        self.vae = _diffusers().AutoencoderKL(**SD_VAE)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(z, return_dict=False)[0]


class SDXLDenoiser(nn.Module):
    """One UNet evaluation of SDXL: (latent, text tokens) -> predicted noise."""

    def __init__(self) -> None:
        super().__init__()
        self.unet = _diffusers().UNet2DConditionModel(**SDXL_UNET)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        b = x.shape[0]
        t = torch.full((b,), 500, device=x.device)
        cond = {"text_embeds": torch.zeros(b, 1280, device=x.device, dtype=x.dtype),
                "time_ids": torch.zeros(b, 6, device=x.device, dtype=x.dtype)}
        return self.unet(x, t, encoder_hidden_states=ctx, added_cond_kwargs=cond, return_dict=False)[0]


def unet() -> SDXLDenoiser:
    return SDXLDenoiser()


def vae_decoder() -> VAEDecoder:
    return VAEDecoder()
