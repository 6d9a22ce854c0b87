"""Strings of the pipeline, attention, decoding and API pages (both languages, our own words)."""

from app.i18n import register

register({
    # -- / : the pipeline ------------------------------------------------------------------
    "pipeline.title": {"zh": "一句话穿过 Transformer", "en": "One sentence through the Transformer"},
    "pipeline.intro": {
        "zh": "输入一句英文，模型先用编码器把整句读完，再让解码器一次写出一个汉字。"
              "下图每个方块都是模型里真实存在的一步，数字是这个模型的实际尺寸；点方块看里面发生了什么。",
        "en": "Type an English sentence. The encoder reads all of it at once, then the decoder writes "
              "the Chinese one character at a time. Every block below is a real stage of this model, "
              "labelled with its actual sizes; click a block to look inside.",
    },
    "pipeline.result": {"zh": "翻译结果", "en": "The translation"},
    "pipeline.probabilities": {
        "zh": "每一步选中的字有多大概率（橙色 = 你强制指定的字）",
        "en": "How likely each chosen character was (orange = a character you forced)",
    },
    "arch.title": {"zh": "模型结构", "en": "The architecture"},
    "arch.input": {"zh": "英文输入", "en": "English input"},
    "arch.input_sub": {"zh": "子词词表 {v} 个", "en": "{v} sub-word tokens"},
    "arch.embedding": {"zh": "词嵌入 + 位置编码", "en": "Embedding + positional encoding"},
    "arch.embedding_sub": {"zh": "每个词元 → {d} 维向量", "en": "each token → {d} numbers"},
    "arch.encoder": {"zh": "编码器 × {n}", "en": "Encoder × {n}"},
    "arch.encoder_sub": {
        "zh": "自注意力（{h} 个头）→ 加和归一 → 前馈 {ff} → 加和归一",
        "en": "self-attention ({h} heads) → Add & Norm → FFN {ff} → Add & Norm",
    },
    "arch.target": {"zh": "已生成的中文（右移一位）", "en": "Chinese so far (shifted right)"},
    "arch.target_sub": {"zh": "以 <bos> 开头；汉字词表 {v} 个", "en": "starts with <bos>; {v} characters"},
    "arch.decoder": {"zh": "解码器 × {n}", "en": "Decoder × {n}"},
    "arch.decoder_sub": {
        "zh": "带掩码的自注意力 → 加和归一 → 交叉注意力 → 加和归一 → 前馈 → 加和归一",
        "en": "masked self-attention → Add & Norm → cross-attention → Add & Norm → FFN → Add & Norm",
    },
    "arch.linear": {"zh": "线性层", "en": "Linear"},
    "arch.linear_sub": {"zh": "{d} → {v} 个分数", "en": "{d} → {v} scores"},
    "arch.softmax": {"zh": "Softmax", "en": "Softmax"},
    "arch.softmax_sub": {"zh": "分数 → 概率", "en": "scores → probabilities"},
    "arch.next": {"zh": "下一个字", "en": "Next token"},
    "arch.next_sub": {"zh": "再送回解码器，直到 <eos>", "en": "fed back in until <eos>"},
    "arch.memory": {"zh": "编码结果（K、V）", "en": "encoder output (K, V)"},
    "arch.params": {"zh": "参数量", "en": "Parameters"},
    "param.source_embedding": {"zh": "英文嵌入", "en": "English embedding"},
    "param.target_embedding": {"zh": "中文嵌入", "en": "Chinese embedding"},
    "param.encoder": {"zh": "编码器", "en": "Encoder"},
    "param.decoder": {"zh": "解码器", "en": "Decoder"},
    "param.output_projection": {"zh": "输出层（与中文嵌入共享权重）",
                                "en": "Output layer (shares the Chinese embedding)"},
    "param.total": {"zh": "合计", "en": "Total"},
    # -- /attention ------------------------------------------------------------------------
    "attention.title": {"zh": "注意力：每个词在看谁", "en": "Attention: who looks at whom"},
    "attention.intro": {
        "zh": "每个小方阵是一个注意力头：行是提问的词（查询），列是被查看的词（键），"
              "颜色越亮权重越大，每一行加起来等于 1。点一个方阵放大，鼠标停在格子上看精确数值。",
        "en": "Each small square is one attention head: rows are the tokens asking (queries), "
              "columns the tokens looked at (keys); brighter means more weight, and every row adds up "
              "to 1. Click a square to enlarge it; hover a cell for its exact weight.",
    },
    "attention.encoder": {"zh": "编码器自注意力", "en": "Encoder self-attention"},
    "attention.encoder_help": {
        "zh": "英文词互相查看，没有遮挡：每个词都能看到整句话，前后都行。",
        "en": "English tokens look at each other with nothing hidden: each sees the whole sentence, "
              "before and after itself.",
    },
    "attention.decoder_self": {"zh": "解码器带掩码的自注意力", "en": "Decoder masked self-attention"},
    "attention.decoder_self_help": {
        "zh": "已经写出的中文互相查看，但右上三角被遮住：写第 t 个字时还不知道后面的字。",
        "en": "The Chinese written so far looks at itself, but the upper-right triangle is blocked: "
              "while writing position t the model cannot peek at later characters.",
    },
    "attention.cross": {"zh": "交叉注意力（中文看英文）", "en": "Cross-attention (Chinese looks at English)"},
    "attention.cross_help": {
        "zh": "每个中文位置向英文编码结果提问：这是翻译时“对齐”源句的地方。",
        "en": "Each Chinese position queries the encoder's output: this is where the translation "
              "lines up with the English.",
    },
    "attention.enlarged": {"zh": "放大的注意力头", "en": "Enlarged head"},
    "attention.open": {"zh": "打开 {kind}，第 {layer} 层，头 {head}",
                       "en": "Open {kind}, layer {layer}, head {head}"},
    "attention.detail": {"zh": "一行注意力是怎么算出来的", "en": "How one row of attention is computed"},
    "attention.detail_intro": {
        "zh": "选一个查询词，看它在这个头里经过的五个阶段，数字都来自刚才那次翻译。",
        "en": "Pick a query token and follow it through the five stages inside this head; every "
              "number comes from the translation above.",
    },
    "attention.query": {"zh": "查询词", "en": "Query token"},
    "stage.qk": {"zh": "① 点积 q·k", "en": "① Dot product q·k"},
    "stage.qk_help": {
        "zh": "查询向量和每个键向量逐维相乘再相加：方向越一致，分数越高。",
        "en": "Multiply the query vector with each key vector dimension by dimension and add up: "
              "the more they point the same way, the higher the score.",
    },
    "stage.scale": {"zh": "② 除以 √d_k = {root}", "en": "② Divide by √d_k = {root}"},
    "stage.scale_help": {
        "zh": "维度越多，点积越大；除以 √d_k 让分数保持在 softmax 不会“饱和”的范围。",
        "en": "Dot products grow with the number of dimensions; dividing by √d_k keeps the scores "
              "where softmax does not saturate.",
    },
    "stage.mask": {"zh": "③ 掩码", "en": "③ Mask"},
    "stage.mask_help": {
        "zh": "不允许看的位置设为 −∞（灰色），softmax 之后它们的权重正好是 0。",
        "en": "Positions that may not be seen become −∞ (grey); after softmax their weight is exactly 0.",
    },
    "stage.softmax": {"zh": "④ Softmax → 权重", "en": "④ Softmax → weights"},
    "stage.softmax_help": {
        "zh": "取指数再归一化，得到加起来为 1 的权重。",
        "en": "Exponentiate and normalise: weights that add up to 1.",
    },
    "stage.sum": {"zh": "⑤ 按权重加总 V", "en": "⑤ Weighted sum of V"},
    "stage.sum_help": {
        "zh": "用权重把各个值向量 v 混合起来，得到这个头对该词的输出（下表显示前几维）。",
        "en": "The weights mix the value vectors v into this head's output for the token "
              "(the first dimensions are shown).",
    },
    "stage.table_key": {"zh": "键", "en": "key"},
    "stage.table_weight_v": {"zh": "权重 × v（前几维）", "en": "weight × v (first dims)"},
    "stage.output": {"zh": "输出", "en": "output"},
    # -- /decode ---------------------------------------------------------------------------
    "decode.title": {"zh": "逐步解码", "en": "Decoding, step by step"},
    "decode.intro": {
        "zh": "解码器每一步只写一个字。用按钮、方向键 ← → 或滑块在各步之间移动；"
              "每一步都显示解码器一层里的七件事，全是真实数值。点候选字可以强制模型选它，然后从那里继续翻译。",
        "en": "The decoder writes one character per step. Move between steps with the buttons, the "
              "← → keys or the slider; each step shows the seven things that happen inside one decoder "
              "layer, with real values. Click a candidate to force it and let decoding continue "
              "from there.",
    },
    "decode.keys": {"zh": "Home / End 跳到第一步 / 最后一步。",
                    "en": "Home / End jump to the first / last step."},
    "decode.prev": {"zh": "← 上一步", "en": "← Previous"},
    "decode.next": {"zh": "下一步 →", "en": "Next →"},
    "decode.slider": {"zh": "时间步", "en": "Time step"},
    "decode.step_of": {"zh": "第 {n} / {total} 步", "en": "Step {n} of {total}"},
    "decode.so_far": {"zh": "解码器此刻的输入：", "en": "Decoder input at this step:"},
    "decode.chose": {"zh": "选中：{token}（p = {prob}）", "en": "Chosen: {token} (p = {prob})"},
    "decode.forced": {"zh": "（强制）", "en": "(forced)"},
    "decode.strategy": {"zh": "解码策略", "en": "Decoding strategy"},
    "decode.greedy": {"zh": "贪心", "en": "Greedy"},
    "decode.sample": {"zh": "采样", "en": "Sampling"},
    "decode.beam": {"zh": "束搜索", "en": "Beam search"},
    "decode.temperature": {"zh": "温度", "en": "Temperature"},
    "decode.top_k": {"zh": "Top-k（留空 = 不限）", "en": "Top-k (empty = off)"},
    "decode.top_p": {"zh": "Top-p（留空 = 不限）", "en": "Top-p (empty = off)"},
    "decode.max_len": {"zh": "最多生成几个字", "en": "Most tokens to write"},
    "decode.beam_size": {"zh": "束宽", "en": "Beam size"},
    "decode.seed": {"zh": "随机种子", "en": "Seed"},
    "decode.apply": {"zh": "重新解码", "en": "Decode again"},
    "decode.layer": {"zh": "查看的解码器层", "en": "Decoder layer shown"},
    "decode.reset": {"zh": "取消强制的字", "en": "Clear forced characters"},
    "decode.force_hint": {
        "zh": "点任意候选字：保留之前的字，把这一步换成它，然后继续解码。",
        "en": "Click any candidate: the characters before stay, this step becomes your choice, "
            "and decoding carries on.",
    },
    "decode.force": {"zh": "强制选 {token}", "en": "Force {token}"},
    "box.self_attention": {"zh": "1 带掩码的自注意力", "en": "1 Masked self-attention"},
    "box.self_attention_help": {
        "zh": "当前位置回看已写出的字（每行一个头）；后面的字还不存在。",
        "en": "The current position looks back over the characters written so far (one row per "
              "head); later ones do not exist yet.",
    },
    "box.add_norm1": {"zh": "2 加和归一", "en": "2 Add & Norm"},
    "box.add_norm_help": {
        "zh": "把子层的输出加回原向量（残差），再做层归一化：先把每个位置的向量变成均值 0、"
              "标准差 1，再乘上学到的缩放 γ、加上学到的偏移 β——所以归一后的统计值只是接近 0 和 1。"
              "图中是前 16 维。",
        "en": "Add the sub-layer's output back onto its input (the residual), then LayerNorm: it "
              "rescales each position's numbers to mean 0 and spread 1, then applies a learned "
              "scale γ and shift β — which is why the figures after it are only close to 0 and 1. "
              "The first 16 dimensions are drawn.",
    },
    "box.cross_attention": {"zh": "3 交叉注意力", "en": "3 Cross-attention"},
    "box.cross_attention_help": {
        "zh": "当前位置向英文句子提问：这一步主要在看哪个英文词？",
        "en": "The current position queries the English sentence: which English tokens matter "
              "for this step?",
    },
    "box.add_norm2": {"zh": "4 加和归一", "en": "4 Add & Norm"},
    "box.ffn": {"zh": "5 前馈网络", "en": "5 Feed-forward network"},
    "box.ffn_help": {
        "zh": "每个位置单独过两层全连接网络，中间用 ReLU：负数变成 0，只有部分神经元被激活。",
        "en": "Each position goes through two linear layers with a ReLU in between: negatives "
              "become 0, so only some hidden units fire.",
    },
    "box.add_norm3": {"zh": "6 加和归一", "en": "6 Add & Norm"},
    "box.softmax": {"zh": "7 线性层 + Softmax", "en": "7 Linear + softmax"},
    "box.softmax_help": {
        "zh": "最后一层的向量乘以输出矩阵，得到每个汉字一个分数，softmax 变成概率。橙色是选中的字。",
        "en": "The last layer's vector times the output matrix gives one score per character; "
              "softmax turns them into probabilities. Orange is the one chosen.",
    },
    "num.residual": {"zh": "‖输入‖ {a} · ‖子层输出‖ {b}", "en": "‖input‖ {a} · ‖sub-layer‖ {b}"},
    "num.norm": {
        "zh": "归一前 均值 {m1} 标准差 {s1} → 归一后 均值 {m2} 标准差 {s2}",
        "en": "before: mean {m1}, std {s1} → after: mean {m2}, std {s2}",
    },
    "num.ffn": {
        "zh": "{d} 个隐藏单元中 {share}% 被激活",
        "en": "{share}% of {d} hidden units fire",
    },
    "num.entropy": {"zh": "熵 {h} nats", "en": "entropy {h} nats"},
    "decode.beam_tree": {"zh": "束搜索树", "en": "The beam-search tree"},
    "decode.beam_help": {
        "zh": "每一步保留得分最高的几个候选序列；方块表示以 <eos> 结束，橙色是最终选中的路径。",
        "en": "Each step keeps the best few partial translations; squares ended with <eos>, and "
              "orange is the path finally chosen.",
    },
    "decode.beam_note": {
        "zh": "束搜索时，下面的逐步视图显示最终选中的那条路径。",
        "en": "With beam search, the step view below follows the path finally chosen.",
    },
    "legend.before_norm": {"zh": "x + 子层(x)", "en": "x + sublayer(x)"},
    "legend.after_norm": {"zh": "LayerNorm 之后", "en": "after LayerNorm"},
    # -- /docs -----------------------------------------------------------------------------
    "docs.title": {"zh": "JSON API", "en": "JSON API"},
    "docs.intro": {
        "zh": "页面用到的所有数据都来自下面这些接口。完整的 OpenAPI 描述：",
        "en": "Every page gets its data from these endpoints. The full OpenAPI description:",
    },
})
