#!/usr/bin/env python3
"""Export the model zoo (`mrvl_ir/models/zoo_onnx/*.onnx`) from PyTorch, once, weight-free.

Torch is not a dependency of mrvl. Run this in a venv of its own (timm makes ViT and
MobileViT):

    python3.11 -m venv .torchvenv
    .torchvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx==1.23.2 onnxruntime==1.31.1
    .torchvenv/bin/pip install timm==1.0.31
    .torchvenv/bin/python scripts/export_zoo.py            # every model
    .torchvenv/bin/python scripts/export_zoo.py resnet18   # some of them

What is exported (`ZOO` below says where each architecture comes from):
- torchvision classifiers at 224x224, each followed by a Softmax over the 1000 classes (the
  form a deployed classifier takes): CNNs, EfficientNetV2-S, ConvNeXt-T and Swin-T; and
  from timm, created offline without weights, ViT-Ti/16 and the hybrid MobileViT-XXS
  (256x256);
- torchvision segmentation models (LRASPP and DeepLabV3 on a MobileNetV3-Large backbone) at
  256x256, returning the `out` logits at input resolution;
- two single-stage detectors written here as small torch modules after the public
  YOLOv5n (v7.0) and YOLOv8n layouts, at 320x320 (`zoo_detectors.py`): Conv-BN-SiLU, C3 /
  C2f blocks, SPPF, nearest upsampling, concatenations, and the detect heads with their
  decoding (reshape, permute, sigmoid, grid and anchor arithmetic, YOLOv8's DFL softmax).
  Each returns two outputs, `boxes` and `scores` (the head's single tensor split in two), so
  that the acceptance rule, which ignores elements below max|ref|/100, judges the class
  scores instead of letting pixel coordinates hide them;
- modules written here after public layouts of the other families people deploy
  (`zoo_detectors.py`, `zoo_modules.py`; each class names its layout): a RetinaFace
  face detector (MobileNet-0.25, FPN with LeakyReLU, nearest upsampling and lateral adds;
  640x640; outputs `boxes`, `scores`, `landmarks`), a BERT-Mini encoder from its summed
  embeddings (1x128x256), PP-OCRv3's text recognizer (conv backbone, SVTR attention neck,
  CTC softmax; 48x320), a U-Net with PixelShuffle upsampling (256x256), the TC-ResNet8
  keyword spotter (conv1d over 40 MFCCs x 98 frames) and MobileFaceNet (112x112 to an
  L2-normalized embedding).

Every model: random init (nothing is downloaded), batch 1, static shapes, opset 17, the
TorchScript exporter (`dynamo=False`; in eval mode it folds each batch norm into the conv
before it, as deployed exports do). Where an export computes constants from shapes at run
time (torchvision's Swin: its window pads and shifted-window masks; timm's ViT: its class
token's batch), those are folded into constants (`fold_constants`, as onnx-simplifier does).
Then the weights are dropped, as the `onnx` package's light models store theirs: each
learned weight becomes `ConstantOfShape(<name>__SHAPE)` of 0.02. A learned weight is a float
initializer that moves when the module is exported again with its parameters moved
(`learned_weights`): a Conv / Gemm / MatMul weight or bias, a folded BatchNormalization, a
LayerNorm's scale and shift, a position embedding, Swin's relative position bias.
Everything else stays as exported: the shape tensors, fixed constants (HardSwish's 3 and 6,
YOLO grids, anchors and strides, Swin's attention masks) and non-trainable parameters
(YOLOv8's DFL bins). `mrvl.models.zoo.load_zoo_model` puts seeded random weights back. The
files are IR version 10 (onnxruntime 1.31 reads up to 13) and are checked with onnx's
checker and onnxruntime. The export is deterministic: running it again writes byte-identical
files.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
import torchvision
from onnx import TensorProto, helper, numpy_helper
from torch import nn
from zoo_detectors import DETECTOR_SIZE, RETINAFACE_SIZE, RetinaFaceMNet, YoloV5n, YoloV8n
from zoo_modules import (
    BertEncoder,
    MobileFaceNet,
    PixelShuffleUNet,
    PPOCRv3Recognizer,
    TCResNet8,
)

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = ROOT / "mrvl_ir" / "models" / "zoo_onnx"
OPSET = 17
ONNX_IR_VERSION = 10
PLACEHOLDER = 0.02  # the light models' ConstantOfShape value
CLASSIFIER_SIZE = 224
SEGMENTATION_SIZE = 256


# ---------------------------------------------------------------------------------------------
# The zoo


class WithSoftmax(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return torch.softmax(self.model(x), 1)


class SegmentationOut(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def _classifier(factory, **kwargs):
    return lambda: WithSoftmax(factory(weights=None, **kwargs))


def _segmentation(factory):
    return lambda: SegmentationOut(factory(weights=None, weights_backbone=None, aux_loss=False))


def _timm_classifier(name: str):
    def factory():
        import timm
        from timm.layers import set_fused_attn

        # attention as q·kᵀ, softmax, ·v (as timm exports it for ONNX), not the fused
        # scaled_dot_product_attention that the exporter decomposes into a Sqrt of the scale
        set_fused_attn(False)
        return WithSoftmax(timm.create_model(name, pretrained=False))

    return factory


@dataclass(frozen=True)
class ZooEntry:
    """How one zoo model is made: its kind, torch factory, input shape, output names and
    where its architecture comes from (`{name}` is the model's name)."""

    kind: str
    factory: Callable[[], nn.Module]
    input: tuple[int, ...]
    source: str
    outputs: tuple[str, ...] = ("output",)
    fold: bool = False  # fold the shape arithmetic and constant subgraphs (`fold_constants`)


tv = torchvision.models
seg = torchvision.models.segmentation
IMAGE = (1, 3, CLASSIFIER_SIZE, CLASSIFIER_SIZE)
TORCHVISION = "torchvision.models.{name}(weights=None), then a Softmax"
TIMM = "timm.create_model('{name}', pretrained=False), then a Softmax"
SEGMENTATION = "torchvision.models.segmentation.{name}(weights=None), output 'out'"
YOLO = "scripts/export_zoo.py, after the public {name} layout"


def _torchvision(factory, **kwargs) -> ZooEntry:
    return ZooEntry("classifier", _classifier(factory, **kwargs), IMAGE, TORCHVISION)


ZOO = {
    "mobilenet_v2": _torchvision(tv.mobilenet_v2),
    "mobilenet_v3_small": _torchvision(tv.mobilenet_v3_small),
    "mobilenet_v3_large": _torchvision(tv.mobilenet_v3_large),
    "efficientnet_b0": _torchvision(tv.efficientnet_b0),
    "regnet_x_400mf": _torchvision(tv.regnet_x_400mf),
    "regnet_y_400mf": _torchvision(tv.regnet_y_400mf),
    "shufflenet_v2_x1_0": _torchvision(tv.shufflenet_v2_x1_0),
    "mnasnet1_0": _torchvision(tv.mnasnet1_0),
    "resnet18": _torchvision(tv.resnet18),
    "resnet50": _torchvision(tv.resnet50),
    "googlenet": _torchvision(tv.googlenet, aux_logits=False, init_weights=True),
    "densenet121": _torchvision(tv.densenet121),
    "squeezenet1_1": _torchvision(tv.squeezenet1_1),
    "lraspp_mobilenet_v3_large": ZooEntry(
        "segmentation",
        lambda: SegmentationOut(seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)),
        (1, 3, SEGMENTATION_SIZE, SEGMENTATION_SIZE),
        SEGMENTATION,
    ),
    "deeplabv3_mobilenet_v3_large": ZooEntry(
        "segmentation",
        _segmentation(seg.deeplabv3_mobilenet_v3_large),
        (1, 3, SEGMENTATION_SIZE, SEGMENTATION_SIZE),
        SEGMENTATION,
    ),
    "yolov5n": ZooEntry(
        "detector", YoloV5n, (1, 3, DETECTOR_SIZE, DETECTOR_SIZE), YOLO, ("boxes", "scores")
    ),
    "yolov8n": ZooEntry(
        "detector", YoloV8n, (1, 3, DETECTOR_SIZE, DETECTOR_SIZE), YOLO, ("boxes", "scores")
    ),
    # issue 21: transformers, hybrids and the other families people deploy
    "efficientnet_v2_s": _torchvision(tv.efficientnet_v2_s),
    "convnext_tiny": _torchvision(tv.convnext_tiny),
    "swin_t": ZooEntry("classifier", _classifier(tv.swin_t), IMAGE, TORCHVISION, fold=True),
    "vit_tiny_patch16_224": ZooEntry(
        "classifier", _timm_classifier("vit_tiny_patch16_224"), IMAGE, TIMM, fold=True
    ),
    "mobilevit_xxs": ZooEntry(
        "classifier", _timm_classifier("mobilevit_xxs"), (1, 3, 256, 256), TIMM
    ),
    "bert_mini": ZooEntry(
        "encoder",
        BertEncoder,
        (1, 128, 256),
        "scripts/zoo_modules.py, after Hugging Face's BertModel at BERT-Mini's size (4 layers, "
        "hidden 256, 4 heads), from the summed embeddings of 128 tokens to the last hidden state",
    ),
    "mobilefacenet": ZooEntry(
        "encoder",
        MobileFaceNet,
        (1, 3, 112, 112),
        "scripts/zoo_modules.py, after MobileFaceNet (Chen et al. 2018) as in "
        "TreB1eN/InsightFace_Pytorch: a 112x112 face to an L2-normalized 128-d embedding",
    ),
    "ppocrv3_rec": ZooEntry(
        "recognizer",
        PPOCRv3Recognizer,
        (1, 3, 48, 320),
        "scripts/zoo_modules.py, after PaddleOCR's PP-OCRv3 English recognizer (SVTR_LCNet: "
        "MobileNetV1Enhance, an SVTR neck, a CTC head with a softmax over 97 symbols)",
    ),
    "unet_pixelshuffle": ZooEntry(
        "segmentation",
        PixelShuffleUNet,
        (1, 3, SEGMENTATION_SIZE, SEGMENTATION_SIZE),
        "scripts/zoo_modules.py, after milesial/Pytorch-UNet at a quarter width, upsampling "
        "by 1x1 conv + PixelShuffle (DepthToSpace)",
    ),
    "retinaface_mnet025": ZooEntry(
        "detector",
        RetinaFaceMNet,
        (1, 3, RETINAFACE_SIZE, RETINAFACE_SIZE),
        "scripts/zoo_detectors.py, after biubug6/Pytorch_Retinaface (MobileNet-0.25, FPN, SSH)",
        ("boxes", "scores", "landmarks"),
    ),
    "tc_resnet8": ZooEntry(
        "audio",
        TCResNet8,
        (1, 40, 98),
        "scripts/zoo_modules.py, after TC-ResNet8 (Choi et al. 2019): conv1d over 98 frames "
        "of 40 MFCCs, a softmax over 12 keywords",
    ),
}


def _randomize_parameters(module: nn.Module, seed: int = 0) -> None:
    """Distinct random values in every parameter and batch-norm statistic before export.

    The stored weights are dropped anyway; this only keeps the exporter from sharing one
    initializer between layers whose folded weights happen to be equal (torchvision inits
    biases to zero and batch norms to the identity, so folded biases would all be equal).
    Non-trainable parameters keep their values.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, nn.modules.batchnorm._BatchNorm):
                n = sub.num_features
                sub.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                sub.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
        for param in module.parameters():
            if param.requires_grad:
                param.add_(torch.randn(param.shape, generator=generator) * 1e-3)


def _export_onnx(module: nn.Module, entry: ZooEntry) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (torch.randn(*entry.input),),
            buffer,
            dynamo=False,
            opset_version=OPSET,
            input_names=["input"],
            output_names=list(entry.outputs),
            do_constant_folding=True,
        )
    model = onnx.load_from_string(buffer.getvalue())
    return fold_constants(model) if entry.fold else model


FOLDED_MAX = 2**20
"""Elements of the largest tensor `fold_constants` writes as an initializer."""


def fold_constants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every node computed only from constants and statically known shapes becomes an
    initializer (what onnx-simplifier does before deployment).

    torchvision's Swin computes its window pads, shifted-window attention masks and relative
    position bias from `Shape` at run time: 4,000 nodes of shape arithmetic (Shape, Mod,
    Range, Where, ScatterND...) around 80 layers, which TVM's importer cannot read as
    static pads. Folded, the masks and biases are constants of the model. Nodes are
    evaluated by `onnx.reference` in graph order, until nothing more folds.
    """
    from onnx.reference import ReferenceEvaluator

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    while True:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        static = {}
        for info in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
            dims = info.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                static[info.name] = [d.dim_value for d in dims]
        known = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        folded = []
        for node in graph.node:
            if node.op_type == "Shape" and node.input[0] in static:
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                shape = np.array(static[node.input[0]], np.int64)
                values = [shape[attrs.get("start", 0) : attrs.get("end", len(shape))]]
            elif node.input and all(not i or i in known for i in node.input):
                inputs = {i: known[i] for i in node.input if i}
                values = ReferenceEvaluator(_single_node_model(node, inputs, model)).run(
                    None, inputs
                )
            elif node.op_type == "Constant":
                values = [numpy_helper.to_array(node.attribute[0].t)]
            else:
                continue
            if any(np.asarray(v).size > FOLDED_MAX for v in values):
                continue
            for out, value in zip(node.output, values):
                known[out] = np.asarray(value)
            folded.append(node)
        if not folded:
            break
        for node in folded:
            graph.node.remove(node)
            for out in node.output:
                graph.initializer.append(numpy_helper.from_array(known[out], out))
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return model


def _single_node_model(node, inputs: dict, model: onnx.ModelProto) -> onnx.ModelProto:
    undefined = TensorProto.UNDEFINED
    graph = helper.make_graph(
        [node],
        "fold",
        [helper.make_tensor_value_info(i, undefined, None) for i in inputs],
        [helper.make_tensor_value_info(o, undefined, None) for o in node.output],
    )
    return helper.make_model(graph, opset_imports=model.opset_import)


def learned_weights(module: nn.Module, entry: ZooEntry, model: onnx.ModelProto) -> set[str]:
    """The float initializers of `model` that are made from learned parameters: those that
    change when the module is exported again with its parameters (and batch-norm statistics)
    moved. This finds a weight whatever op reads it (a conv, a Linear's Add of its bias, a
    LayerNorm's scale, a folded table of relative position biases); fixed constants (a
    detector's grid, HardSwish's 3, a shifted window's attention mask) do not move."""
    moved = copy.deepcopy(module)
    _randomize_parameters(moved, seed=1)
    again = _export_onnx(moved, entry)
    before = {i.name: i for i in model.graph.initializer}
    after = {i.name: i for i in again.graph.initializer}
    if set(before) != set(after):
        raise RuntimeError("two exports of the same module named their initializers differently")
    return {
        name
        for name, init in before.items()
        if init.data_type == TensorProto.FLOAT and init.raw_data != after[name].raw_data
    }


def export(name: str) -> tuple[onnx.ModelProto, dict]:
    entry = ZOO[name]
    torch.manual_seed(0)
    module = entry.factory().eval()
    _randomize_parameters(module)
    fixed = {n for n, p in module.named_parameters() if not p.requires_grad}
    model = _export_onnx(module, entry)
    model = strip_weights(model, learned_weights(module, entry, model) - fixed)
    source = entry.source.format(name=name)
    model.producer_name = "mrvl scripts/export_zoo.py"
    model.producer_version = f"torch {torch.__version__}, torchvision {torchvision.__version__}"
    if entry.source == TIMM:
        import timm

        model.producer_version += f", timm {timm.__version__}"
    model.doc_string = (
        f"{name}: {source}; input {'x'.join(map(str, entry.input))}; opset {OPSET}; "
        f"weights stored as ConstantOfShape({PLACEHOLDER}): mrvl.models.zoo re-weights them"
    )
    onnx.checker.check_model(model, full_check=True)
    info = {
        "kind": entry.kind,
        "input": list(entry.input),
        "outputs": list(entry.outputs),
        "source": source,
        "params": sum(p.numel() for p in module.parameters()),
        "macs": _macs(model),
        "ops": dict(sorted(Counter(n.op_type for n in model.graph.node).items())),
    }
    return model, info


def strip_weights(model: onnx.ModelProto, learned: set[str]) -> onnx.ModelProto:
    """The `learned` weights → `ConstantOfShape(<name>__SHAPE)`; every other initializer
    stays; each weight gets a consumer of its own."""
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    learned = set(learned)

    # Identity nodes on initializers (the exporter's way of sharing equal constants) become
    # initializers of their own.
    nodes = []
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits:
            copy = onnx.TensorProto()
            copy.CopyFrom(inits[node.input[0]])
            copy.name = node.output[0]
            inits[copy.name] = copy
            if node.input[0] in learned:
                learned.add(copy.name)
            continue
        nodes.append(node)

    uses: Counter = Counter(name for node in nodes for name in node.input)
    weights: dict[str, onnx.TensorProto] = {}
    for node in nodes:
        for name in node.input:
            if name not in learned or name not in inits or name in weights:
                continue
            if uses[name] != 1:
                raise RuntimeError(f"weight {name} is shared by {uses[name]} uses")
            weights[name] = inits[name]

    generators, shapes = [], []
    for name in sorted(weights):
        shape_name = f"{name}__SHAPE"
        dims = np.array(weights[name].dims, dtype=np.int64)
        shapes.append(numpy_helper.from_array(dims, shape_name))
        value = helper.make_tensor("", TensorProto.FLOAT, [1], [PLACEHOLDER])
        generators.append(
            helper.make_node(
                "ConstantOfShape", [shape_name], [name], name=f"{name}__CONSTANT", value=value
            )
        )
    used = {name for node in nodes for name in node.input}
    kept = [i for name, i in inits.items() if name not in weights and name in used]
    del graph.node[:]
    graph.node.extend(generators + nodes)
    del graph.initializer[:]
    graph.initializer.extend(shapes + kept)
    del graph.value_info[:]
    model.ir_version = ONNX_IR_VERSION
    return model


def _macs(model: onnx.ModelProto) -> int:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for info in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shapes[info.name] = [d.dim_value for d in info.type.tensor_type.shape.dim]
    gen = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "ConstantOfShape"}
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}

    def shape(name):
        if name in gen:
            return list(inits[gen[name]])
        if name in inits:
            return list(inits[name].shape)
        return shapes[name]

    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            total += math.prod(shape(node.output[0])) * math.prod(shape(node.input[1])[1:])
        elif node.op_type in ("Gemm", "MatMul"):
            a = shape(node.input[0])
            total += math.prod(shape(node.output[0])) * a[-1]
    return int(total)


def check(model: onnx.ModelProto, info: dict) -> None:
    """onnxruntime loads and runs the weight-free file (its outputs are degenerate, even
    infinite in deep networks: every weight is 0.02); records the output shapes."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(info["input"]).astype(np.float32)
    for out, value in zip(info["outputs"], session.run(info["outputs"], {"input": x})):
        info.setdefault("output_shapes", {})[out] = list(value.shape)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"models (default all): {', '.join(ZOO)}")
    parser.add_argument("--out", type=Path, default=ZOO_DIR)
    args = parser.parse_args(argv)
    names = args.names or list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for name in names:
        model, info = export(name)
        check(model, info)
        path = args.out / f"{name}.onnx"
        onnx.save(model, path)
        manifest[name] = info
        print(
            f"{name:30s} {info['macs'] / 1e9:6.3f} GMAC {info['params'] / 1e6:6.2f} M params "
            f"{path.stat().st_size / 1024:7.1f} KiB  {len(model.graph.node)} nodes",
            flush=True,
        )
    ordered = {name: manifest[name] for name in ZOO if name in manifest}
    manifest_path.write_text(json.dumps(ordered, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
