"""Recommendation, graph, mixture-of-experts, point-cloud, contrastive and audio models written the way
popular GitHub repositories write them (tiny sizes, random weights).

DLRM (facebookresearch/dlrm: EmbeddingBag with offsets, dot interaction via bmm and a lower-triangle
index), GCN / message passing with `index_add_` and `scatter_add_` (Kipf's pygcn, a hand-written
PyG-style MessagePassing), a top-k mixture of experts (Switch/GShard style: topk, gather, scatter
into dense combine weights, no data-dependent Python), PointNet (input transform with bmm, max
over points), a CLIP-style contrastive loss, a gradient-reversal layer (torch.autograd.Function,
DANN), and a WaveNet/HiFi-GAN style stack with weight-norm parametrizations.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from dynamo_lite.report.registry import model


# --------------------------------------------------------------------------------------------
# DLRM (facebookresearch/dlrm dlrm_s_pytorch.py)
# --------------------------------------------------------------------------------------------

class DLRM(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, len(ln) - 1):
            n, m = int(ln[i]), int(ln[i + 1])
            LL = nn.Linear(n, m, bias=True)
            layers.append(LL)
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, len(ln)):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False)
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa=8, ln_emb=(20, 30, 10), ln_bot=(4, 16, 8), ln_top=(14, 16, 1),
                 arch_interaction_op="dot", arch_interaction_itself=False):
        super().__init__()
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, -1)
        self.top_l = self.create_mlp(ln_top, len(ln_top) - 2)

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            R = torch.cat([x] + ly, dim=1)
        else:
            raise ValueError("ERROR: --arch-interaction-op=" + self.arch_interaction_op + " is not supported")
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        return p


def _dlrm_inputs(batch=4, ln_emb=(20, 30, 10), per_bag=3):
    dense_x = torch.randn(batch, 4)
    lS_o, lS_i = [], []
    for n in ln_emb:
        lengths = torch.randint(1, per_bag + 1, (batch,))
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        lS_o.append(offsets)
        lS_i.append(torch.randint(0, n, (int(lengths.sum()),)))
    return dense_x, lS_o, lS_i


@model("dlrm", tags=("recsys", "embeddingbag"))
def build_dlrm():
    """DLRM: EmbeddingBag(sum) with offsets per table, bottom/top MLPs, dot interaction (bmm + tril index)."""
    torch.manual_seed(0)
    return DLRM().eval(), _dlrm_inputs()


# --------------------------------------------------------------------------------------------
# Graph neural networks (tkipf/pygcn; a PyG-style MessagePassing written out)
# --------------------------------------------------------------------------------------------

class GraphConvolution(nn.Module):
    """GCN layer: symmetric-normalised aggregation with index_add_ over an edge list."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, x, edge_index):
        num_nodes = x.size(0)
        loops = torch.arange(num_nodes, device=x.device)
        src = torch.cat([edge_index[0], loops])
        dst = torch.cat([edge_index[1], loops])
        deg = torch.zeros(num_nodes, dtype=x.dtype, device=x.device).index_add_(
            0, dst, torch.ones_like(dst, dtype=x.dtype))
        deg_inv_sqrt = deg.pow(-0.5)
        deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float("inf"), 0)
        norm = deg_inv_sqrt[src] * deg_inv_sqrt[dst]

        support = torch.mm(x, self.weight)
        out = torch.zeros_like(support).index_add_(0, dst, support[src] * norm.unsqueeze(-1))
        if self.bias is not None:
            return out + self.bias
        return out


class GCN(nn.Module):
    def __init__(self, nfeat=8, nhid=16, nclass=3, dropout=0.5):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def _graph(num_nodes=10, num_edges=24, feats=8):
    x = torch.randn(num_nodes, feats)
    edge_index = torch.randint(0, num_nodes, (2, num_edges))
    return x, edge_index


@model("gcn", tags=("graph", "gnn", "scatter"))
def build_gcn():
    """pygcn-style GCN over an edge list: degree normalisation and aggregation with index_add_."""
    torch.manual_seed(0)
    return GCN().eval(), _graph()


class MessagePassing(nn.Module):
    """A minimal PyG-style base class: propagate = message -> aggregate (scatter_add_) -> update."""

    def __init__(self, aggr="add"):
        super().__init__()
        assert aggr in ("add", "mean", "max")
        self.aggr = aggr

    def propagate(self, edge_index, size, **kwargs):
        x_j = kwargs["x"].index_select(0, edge_index[0])
        x_i = kwargs["x"].index_select(0, edge_index[1])
        msg = self.message(x_i, x_j, kwargs.get("edge_attr"))
        out = self.aggregate(msg, edge_index[1], size)
        return self.update(out, kwargs["x"])

    def aggregate(self, msg, index, dim_size):
        index_exp = index.unsqueeze(-1).expand_as(msg)
        out = msg.new_zeros(dim_size, msg.size(-1)).scatter_add_(0, index_exp, msg)
        if self.aggr == "mean":
            count = msg.new_zeros(dim_size).scatter_add_(0, index, torch.ones_like(index, dtype=msg.dtype))
            out = out / count.clamp(min=1).unsqueeze(-1)
        elif self.aggr == "max":
            out = msg.new_full((dim_size, msg.size(-1)), float("-inf")).scatter_reduce(
                0, index_exp, msg, reduce="amax", include_self=True)
            out = torch.where(torch.isinf(out), torch.zeros_like(out), out)
        return out

    def message(self, x_i, x_j, edge_attr):
        return x_j

    def update(self, aggr_out, x):
        return aggr_out


class EdgeConv(MessagePassing):
    def __init__(self, in_channels, out_channels, edge_dim, aggr):
        super().__init__(aggr=aggr)
        self.mlp = nn.Sequential(nn.Linear(2 * in_channels + edge_dim, out_channels), nn.ReLU(),
                                 nn.Linear(out_channels, out_channels))
        self.root = nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index, edge_attr):
        return self.propagate(edge_index, size=x.size(0), x=x, edge_attr=edge_attr)

    def message(self, x_i, x_j, edge_attr):
        return self.mlp(torch.cat([x_i, x_j - x_i, edge_attr], dim=-1))

    def update(self, aggr_out, x):
        return aggr_out + self.root(x)


class MPNN(nn.Module):
    def __init__(self, in_channels=8, hidden=16, edge_dim=4, out=2):
        super().__init__()
        self.conv1 = EdgeConv(in_channels, hidden, edge_dim, aggr="mean")
        self.conv2 = EdgeConv(hidden, hidden, edge_dim, aggr="max")
        self.head = nn.Linear(hidden, out)

    def forward(self, x, edge_index, edge_attr, batch):
        x = F.relu(self.conv1(x, edge_index, edge_attr))
        x = F.relu(self.conv2(x, edge_index, edge_attr))
        # global_add_pool over graphs in the batch
        num_graphs = 2
        pooled = x.new_zeros(num_graphs, x.size(-1)).index_add_(0, batch, x)
        return self.head(pooled)


@model("mpnn_scatter", tags=("graph", "gnn", "scatter"))
def build_mpnn():
    """PyG-style MessagePassing (**kwargs propagate, overridden message/update), scatter_add_/scatter_reduce."""
    torch.manual_seed(0)
    x, edge_index = _graph()
    edge_attr = torch.randn(edge_index.size(1), 4)
    batch = torch.tensor([0] * 5 + [1] * 5)
    return MPNN().eval(), (x, edge_index, edge_attr, batch)


# --------------------------------------------------------------------------------------------
# Mixture of experts with top-k routing (Switch Transformer / GShard style, dense dispatch)
# --------------------------------------------------------------------------------------------

class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class TopKMoE(nn.Module):
    def __init__(self, dim=16, hidden=32, num_experts=4, k=2):
        super().__init__()
        self.num_experts = num_experts
        self.k = k
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(dim, hidden) for _ in range(num_experts)])

    def forward(self, x):
        B, T, D = x.shape
        tokens = x.reshape(-1, D)
        logits = self.gate(tokens)                                   # [N, E]
        probs = F.softmax(logits, dim=-1)
        topk_probs, topk_idx = torch.topk(probs, self.k, dim=-1)     # [N, k]
        topk_probs = topk_probs / topk_probs.sum(dim=-1, keepdim=True)
        # dense combine weights: zero except at the chosen experts
        combine = torch.zeros_like(probs).scatter(1, topk_idx, topk_probs)  # [N, E]
        expert_out = torch.stack([expert(tokens) for expert in self.experts], dim=1)  # [N, E, D]
        out = (combine.unsqueeze(-1) * expert_out).sum(dim=1)
        # load-balancing auxiliary loss (Switch Transformer)
        mask = F.one_hot(topk_idx[:, 0], self.num_experts).float()
        density = mask.mean(dim=0)
        density_proxy = probs.mean(dim=0)
        aux_loss = (density * density_proxy).sum() * self.num_experts
        # the probability of the chosen experts, gathered back
        chosen = probs.gather(1, topk_idx)
        return out.view(B, T, D), aux_loss, chosen


@model("moe_topk", tags=("moe", "routing", "transformer"))
def build_moe():
    """Top-2 MoE: softmax gate, torch.topk, scatter into dense combine weights, gather, aux loss."""
    torch.manual_seed(0)
    return TopKMoE().eval(), (torch.randn(2, 6, 16),)


# --------------------------------------------------------------------------------------------
# PointNet (charlesq34/pointnet, fxia22/pointnet.pytorch)
# --------------------------------------------------------------------------------------------

class STN3d(nn.Module):
    def __init__(self, k=3):
        super().__init__()
        self.k = k
        self.conv1 = nn.Conv1d(k, 16, 1)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.fc1 = nn.Linear(32, 16)
        self.fc2 = nn.Linear(16, k * k)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 32)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        iden = torch.eye(self.k, dtype=x.dtype).view(1, self.k * self.k).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetCls(nn.Module):
    def __init__(self, k=4):
        super().__init__()
        self.stn = STN3d()
        self.conv1 = nn.Conv1d(3, 16, 1)
        self.conv2 = nn.Conv1d(16, 32, 1)
        self.bn1 = nn.BatchNorm1d(16)
        self.bn2 = nn.BatchNorm1d(32)
        self.fc = nn.Linear(32, k)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        pointfeat = x
        x = self.bn2(self.conv2(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 32)
        return F.log_softmax(self.fc(x), dim=1), trans, pointfeat.shape[1] + n_pts


@model("pointnet", tags=("point-cloud", "batchnorm"))
def build_pointnet():
    """PointNet classifier: input transform net (bmm with predicted 3x3), max over points, x.is_cuda check."""
    torch.manual_seed(0)
    return PointNetCls().eval(), (torch.randn(2, 3, 20),)


# --------------------------------------------------------------------------------------------
# CLIP-style contrastive model (openai/CLIP model.py forward + the training loss)
# --------------------------------------------------------------------------------------------

class TinyCLIP(nn.Module):
    def __init__(self, image_dim=24, text_vocab=50, embed_dim=16):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(image_dim, 32), nn.GELU(), nn.Linear(32, embed_dim))
        self.token_embedding = nn.Embedding(text_vocab, 32)
        self.text_projection = nn.Parameter(torch.randn(32, embed_dim) * 32 ** -0.5)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def encode_image(self, image):
        return self.visual(image)

    def encode_text(self, text):
        x = self.token_embedding(text)
        # take features from the eot embedding (eot_token is the highest number in each sequence)
        x = x[torch.arange(x.shape[0]), text.argmax(dim=-1)] @ self.text_projection
        return x

    def forward(self, image, text):
        image_features = self.encode_image(image)
        text_features = self.encode_text(text)

        # normalized features
        image_features = image_features / image_features.norm(dim=1, keepdim=True)
        text_features = text_features / text_features.norm(dim=1, keepdim=True)

        # cosine similarity as logits
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        logits_per_text = logits_per_image.t()

        labels = torch.arange(image.shape[0], device=image.device)
        loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
        return logits_per_image, logits_per_text, loss


@model("clip_contrastive", tags=("multimodal", "loss"))
def build_clip():
    """CLIP forward: eot-token gather via argmax, normalised features, logit_scale.exp(), symmetric CE loss."""
    torch.manual_seed(0)
    return TinyCLIP().eval(), (torch.randn(4, 24), torch.randint(0, 50, (4, 7)))


# --------------------------------------------------------------------------------------------
# Gradient reversal (DANN; torch.autograd.Function) and weight-norm WaveNet (HiFi-GAN style)
# --------------------------------------------------------------------------------------------

class GradientReversalFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class DANN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.label_head = nn.Linear(16, 3)
        self.domain_head = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, x, alpha: float = 0.5):
        feats = self.features(x)
        reversed_feats = GradientReversalFn.apply(feats, alpha)
        return self.label_head(feats), self.domain_head(reversed_feats)


@model("dann_grad_reversal", tags=("autograd-function",))
def build_dann():
    """Domain-adversarial net: custom torch.autograd.Function (gradient reversal) in forward."""
    torch.manual_seed(0)
    return DANN().eval(), (torch.randn(4, 12),)


class ResBlock1(nn.Module):
    def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.convs = nn.ModuleList([
            wn(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=(kernel_size * d - d) // 2))
            for d in dilation])

    def forward(self, x):
        for c in self.convs:
            xt = F.leaky_relu(x, 0.1)
            xt = c(xt)
            x = xt + x
        return x


class TinyHiFiGAN(nn.Module):
    def __init__(self, in_channels=8, channels=16):
        super().__init__()
        wn = nn.utils.parametrizations.weight_norm
        self.conv_pre = wn(nn.Conv1d(in_channels, channels, 7, 1, padding=3))
        self.up = wn(nn.ConvTranspose1d(channels, channels // 2, 4, 2, padding=1))
        self.resblock = ResBlock1(channels // 2)
        self.conv_post = wn(nn.Conv1d(channels // 2, 1, 7, 1, padding=3))

    def forward(self, x):
        x = self.conv_pre(x)
        x = self.up(F.leaky_relu(x, 0.1))
        x = self.resblock(x)
        x = self.conv_post(F.leaky_relu(x))
        return torch.tanh(x)


@model("hifigan_weight_norm", tags=("audio", "parametrization"))
def build_hifigan():
    """HiFi-GAN generator slice: weight_norm parametrizations (parametrized .weight), dilated residual convs."""
    torch.manual_seed(0)
    return TinyHiFiGAN().eval(), (torch.randn(1, 8, 12),)
