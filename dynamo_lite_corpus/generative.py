"""Generative models written the way popular GitHub repositories write them (tiny sizes, random weights).

A VAE (pytorch/examples vae: reparameterisation with torch.randn_like; eval returns the mean so the
output is deterministic, and a "sampling" variant that draws noise and relies on identical seeding
of eager and captured runs), a VQ-VAE quantiser (argmin codebook lookup, straight-through
estimator), and a diffusion UNet with sinusoidal timestep embeddings, GroupNorm residual blocks
and self-attention (denoising-diffusion-pytorch / DDPM style).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from dynamo_lite.report.registry import model


# --------------------------------------------------------------------------------------------
# VAE (pytorch/examples vae/main.py)
# --------------------------------------------------------------------------------------------

class VAE(nn.Module):
    def __init__(self, in_dim=48, hidden=32, latent=8, sample_in_eval=False):
        super().__init__()
        self.in_dim = in_dim
        self.sample_in_eval = sample_in_eval
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, in_dim)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        if self.training or self.sample_in_eval:
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std
        return mu

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, self.in_dim))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def vae_loss(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, recon_x.size(-1)), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


class VAEWithLoss(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.vae = VAE(**kwargs)

    def forward(self, x):
        recon, mu, logvar = self.vae(x)
        return recon, vae_loss(recon, x, mu, logvar)


@model("vae", tags=("generative", "vae", "loss"))
def build_vae():
    """VAE in eval: reparameterize returns the mean (deterministic path); BCE + KL loss."""
    torch.manual_seed(0)
    return VAEWithLoss().eval(), (torch.rand(4, 3, 16),)


@model("vae_sampling", tags=("generative", "vae", "random"))
def build_vae_sampling():
    """VAE that samples with torch.randn_like: agrees with eager only if the RNG is seeded identically."""
    torch.manual_seed(0)
    return VAE(sample_in_eval=True).eval(), (torch.rand(4, 48),)


# --------------------------------------------------------------------------------------------
# VQ-VAE quantiser (rosinality/vq-vae-2-pytorch, zalandoresearch/pytorch-vq-vae)
# --------------------------------------------------------------------------------------------

class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings=16, embedding_dim=8, commitment_cost=0.25):
        super().__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
        self._embedding.weight.data.uniform_(-1 / self._num_embeddings, 1 / self._num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        # convert inputs from BCHW -> BHWC
        inputs = inputs.permute(0, 2, 3, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)

        distances = (torch.sum(flat_input ** 2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight ** 2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))

        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)

        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)

        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss

        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        return loss, quantized.permute(0, 3, 1, 2).contiguous(), perplexity, encodings


class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 8, 3, 1, 1))
        self.vq = VectorQuantizer()
        self.decoder = nn.Sequential(nn.ConvTranspose2d(8, 16, 4, 2, 1), nn.ReLU(), nn.Conv2d(16, 3, 3, 1, 1))

    def forward(self, x):
        z = self.encoder(x)
        loss, quantized, perplexity, _ = self.vq(z)
        return loss, self.decoder(quantized), perplexity


@model("vqvae", tags=("generative", "vae"))
def build_vqvae():
    """VQ-VAE: codebook distances, argmin, one-hot scatter_, straight-through estimator, perplexity."""
    torch.manual_seed(0)
    return VQVAE().eval(), (torch.randn(2, 3, 8, 8),)


# --------------------------------------------------------------------------------------------
# Diffusion UNet (lucidrains/denoising-diffusion-pytorch, hojonathanho/diffusion)
# --------------------------------------------------------------------------------------------

class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim, theta=10000):
        super().__init__()
        self.dim = dim
        self.theta = theta

    def forward(self, x):
        device = x.device
        half_dim = self.dim // 2
        emb = math.log(self.theta) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, device=device) * -emb)
        emb = x[:, None] * emb[None, :]
        emb = torch.cat((emb.sin(), emb.cos()), dim=-1)
        return emb


def exists(x):
    return x is not None


def default(val, d):
    if exists(val):
        return val
    return d() if callable(d) else d


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=4):
        super().__init__()
        self.proj = nn.Conv2d(dim, dim_out, 3, padding=1)
        self.norm = nn.GroupNorm(groups, dim_out)
        self.act = nn.SiLU()

    def forward(self, x, scale_shift=None):
        x = self.proj(x)
        x = self.norm(x)
        if exists(scale_shift):
            scale, shift = scale_shift
            x = x * (scale + 1) + shift
        x = self.act(x)
        return x


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, *, time_emb_dim=None, groups=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out * 2)) if exists(time_emb_dim) else None
        self.block1 = Block(dim, dim_out, groups=groups)
        self.block2 = Block(dim_out, dim_out, groups=groups)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb=None):
        scale_shift = None
        if exists(self.mlp) and exists(time_emb):
            time_emb = self.mlp(time_emb)
            time_emb = time_emb[:, :, None, None]     # 'b c -> b c 1 1'
            scale_shift = time_emb.chunk(2, dim=1)
        h = self.block1(x, scale_shift=scale_shift)
        h = self.block2(h)
        return h + self.res_conv(x)


class AttnBlock(nn.Module):
    def __init__(self, dim, heads=2, dim_head=8):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        hidden_dim = dim_head * heads
        self.norm = nn.GroupNorm(1, dim)
        self.to_qkv = nn.Conv2d(dim, hidden_dim * 3, 1, bias=False)
        self.to_out = nn.Conv2d(hidden_dim, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        qkv = self.to_qkv(self.norm(x)).chunk(3, dim=1)
        q, k, v = map(lambda t: t.reshape(b, self.heads, -1, h * w), qkv)   # 'b (h c) x y -> b h c (x y)'
        q = q * self.scale
        sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)
        attn = sim.softmax(dim=-1)
        out = torch.einsum("b h i j, b h d j -> b h i d", attn, v)
        out = out.permute(0, 1, 3, 2).reshape(b, -1, h, w)               # 'b h (x y) d -> b (h d) x y'
        return self.to_out(out) + x


class Downsample(nn.Module):
    def __init__(self, dim, dim_out=None):
        super().__init__()
        self.conv = nn.Conv2d(dim, default(dim_out, dim), 4, 2, 1)

    def forward(self, x):
        return self.conv(x)


class Upsample(nn.Module):
    def __init__(self, dim, dim_out=None):
        super().__init__()
        self.conv = nn.Conv2d(dim, default(dim_out, dim), 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2, mode="nearest"))


class DiffusionUnet(nn.Module):
    def __init__(self, dim=8, dim_mults=(1, 2), channels=3):
        super().__init__()
        self.channels = channels
        self.init_conv = nn.Conv2d(channels, dim, 7, padding=3)
        dims = [dim, *map(lambda m: dim * m, dim_mults)]
        in_out = list(zip(dims[:-1], dims[1:]))
        time_dim = dim * 4
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, time_dim), nn.GELU(),
                                      nn.Linear(time_dim, time_dim))
        self.downs = nn.ModuleList([])
        self.ups = nn.ModuleList([])
        num_resolutions = len(in_out)
        for ind, (dim_in, dim_out) in enumerate(in_out):
            is_last = ind >= (num_resolutions - 1)
            self.downs.append(nn.ModuleList([
                ResnetBlock(dim_in, dim_in, time_emb_dim=time_dim),
                ResnetBlock(dim_in, dim_in, time_emb_dim=time_dim),
                Downsample(dim_in, dim_out) if not is_last else nn.Conv2d(dim_in, dim_out, 3, padding=1)]))
        mid_dim = dims[-1]
        self.mid_block1 = ResnetBlock(mid_dim, mid_dim, time_emb_dim=time_dim)
        self.mid_attn = AttnBlock(mid_dim)
        self.mid_block2 = ResnetBlock(mid_dim, mid_dim, time_emb_dim=time_dim)
        for ind, (dim_in, dim_out) in enumerate(reversed(in_out)):
            is_last = ind == (len(in_out) - 1)
            self.ups.append(nn.ModuleList([
                ResnetBlock(dim_out + dim_in, dim_out, time_emb_dim=time_dim),
                ResnetBlock(dim_out + dim_in, dim_out, time_emb_dim=time_dim),
                Upsample(dim_out, dim_in) if not is_last else nn.Conv2d(dim_out, dim_in, 3, padding=1)]))
        self.final_res_block = ResnetBlock(dim * 2, dim, time_emb_dim=time_dim)
        self.final_conv = nn.Conv2d(dim, channels, 1)

    def forward(self, x, time):
        x = self.init_conv(x)
        r = x.clone()
        t = self.time_mlp(time)
        h = []
        for block1, block2, downsample in self.downs:
            x = block1(x, t)
            h.append(x)
            x = block2(x, t)
            h.append(x)
            x = downsample(x)
        x = self.mid_block1(x, t)
        x = self.mid_attn(x)
        x = self.mid_block2(x, t)
        for block1, block2, upsample in self.ups:
            x = torch.cat((x, h.pop()), dim=1)
            x = block1(x, t)
            x = torch.cat((x, h.pop()), dim=1)
            x = block2(x, t)
            x = upsample(x)
        x = torch.cat((x, r), dim=1)
        x = self.final_res_block(x, t)
        return self.final_conv(x)


@model("diffusion_unet", tags=("generative", "diffusion", "cnn"))
def build_diffusion_unet():
    """DDPM UNet: sinusoidal timestep embedding, scale-shift GroupNorm ResNet blocks, einsum attention."""
    torch.manual_seed(0)
    return DiffusionUnet().eval(), (torch.randn(2, 3, 8, 8), torch.tensor([3.0, 500.0]))
