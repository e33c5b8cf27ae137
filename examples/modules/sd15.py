"""Stable Diffusion 1.5's denoiser (Rombach et al., CVPR'22), built by diffusers from the public
`runwayml/stable-diffusion-v1-5` `unet/config.json` (its fields below; no weights are read), for

    distscope serve diffusion --model torch:examples/modules/sd15.py:unet \
        --input x:2x4x64x64:fp16,ctx:2x77x768:fp16 --cluster dgx-a100 --gpus 1,2,4

x:2x4x64x64 is one 512x512 image's latent with classifier-free guidance's two halves; ctx is CLIP
ViT-L/14's 77 tokens of 768 features. Its VAE decoder is sdxl.py's `vae_decoder` (the same layers),
run in fp16 by Stable Diffusion 1.5's pipeline. Needs diffusers: `pip install 'distscope[diffusion]'`.
"""

from __future__ import annotations

import torch
from torch import nn

SD15_UNET = {
    "act_fn": "silu", "attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280],
    "center_input_sample": False, "cross_attention_dim": 768,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "downsample_padding": 1, "flip_sin_to_cos": True, "freq_shift": 0, "in_channels": 4, "layers_per_block": 2,
    "mid_block_scale_factor": 1, "norm_eps": 1e-05, "norm_num_groups": 32, "out_channels": 4, "sample_size": 64,
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
}


class SD15Denoiser(nn.Module):
    """One UNet evaluation of Stable Diffusion 1.5: (latent, text tokens) -> predicted noise."""

    def __init__(self) -> None:
        super().__init__()
        try:
            from diffusers import UNet2DConditionModel
        except ImportError as exc:
            raise ImportError("examples/modules/sd15.py needs diffusers: pip install 'distscope[diffusion]'") from exc
        self.unet = UNet2DConditionModel(**SD15_UNET)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        t = torch.full((x.shape[0],), 500, device=x.device)
        return self.unet(x, t, encoder_hidden_states=ctx, return_dict=False)[0]


def unet() -> SD15Denoiser:
    return SD15Denoiser()
