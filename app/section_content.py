"""Strings of the section pages (tokens, embeddings, coreference, training, KV cache, scale, tour).

Written for this app in both languages; the structured lists (design questions, improvements,
timeline, tour steps) name i18n keys so the templates render them in either language.
"""

from __future__ import annotations

from app.i18n import register

# A training batch is the user's sentence plus two of these (source, human reference) pairs:
# one shorter and one longer, so padding shows up on both sides.
BATCH_COMPANIONS = [
    ("I like tea.", "我喜欢茶。"),
    ("We are students.", "我们是学生。"),
    ("The weather is very nice today, so we will walk to the park after lunch.",
     "今天天气很好，所以午饭后我们会走路去公园。"),
    ("My brother reads a book in the library every evening before he goes home.",
     "我哥哥每天晚上回家前都在图书馆看书。"),
]

DESIGN_QUESTIONS = ["deep", "wide", "ffn", "heads", "rlhf", "moe"]
IMPROVEMENTS = {
    "efficiency": ["flash", "sparse", "linear", "gqa"],
    "positions": ["rope", "alibi", "relative", "ntk"],
    "architecture": ["prenorm", "swiglu", "moe", "decoder_only"],
    "long_context": ["interpolation", "sliding", "ring", "memory"],
    "multimodal": ["vit", "clip", "whisper", "video"],
}
TIMELINE = ["2017", "2018", "2020", "2022", "2024"]
CHATGPT_STAGES = ["pretrain", "sft", "rm", "ppo"]

# The guided tour, in the documents' order: (path, pipeline stages highlighted, i18n key prefix).
TOUR = [
    ("/", "all", "tour.pipeline"),
    ("/tokens", "tokens", "tour.tokens"),
    ("/embeddings", "embedding", "tour.embeddings"),
    ("/attention", "encoder", "tour.attention"),
    ("/coreference", "encoder", "tour.coreference"),
    ("/training", "loss", "tour.training"),
    ("/decode", "decoder output", "tour.decode"),
    ("/kv-cache", "decoder", "tour.kv"),
    ("/scale", "all", "tour.scale"),
]
PIPELINE_STAGES = ["tokens", "embedding", "encoder", "decoder", "output", "loss"]

register({
    "nav.coreference": {"zh": "代词指代", "en": "Coreference"},
    "nav.kv_cache": {"zh": "KV 缓存", "en": "KV cache"},
    "tour.preview": {
        "zh": "上图由模型现场为你的句子算出；点下面的按钮打开完整的一页。",
        "en": "Computed live by the model for your sentence; the button below opens the full page.",
    },
    "sec.open_live": {"zh": "在这一页用你的句子试试", "en": "Try it with your sentence"},
    "sec.failed": {"zh": "请求失败：", "en": "Request failed: "},
    "sec.estimate": {"zh": "估计值（非官方）", "en": "estimate (unofficial)"},
    "sec.from_model": {"zh": "由本模型实时计算", "en": "computed live by this model"},
    "sec.yes": {"zh": "是", "en": "yes"},
    "sec.no": {"zh": "否", "en": "no"},
    "sec.position": {"zh": "位置", "en": "position"},
    "sec.dimension": {"zh": "维度", "en": "dimension"},
    "sec.step": {"zh": "步", "en": "step"},
    # ---------------------------------------------------------------------------------- /tokens
    "tokens.title": {"zh": "数据准备：从文字到编号", "en": "Data preparation: from text to ids"},
    "tokens.intro": {
        "zh": "模型不认识字母和汉字，只认识整数。英文先被切成子词（不常见的词会拆成几块，"
              "后续块以 ## 开头），中文则一个字一个编号。句子结尾加 <eos>，解码器的输入开头加 <bos>。",
        "en": "The model reads integers, not letters or characters. English is cut into sub-word "
              "pieces (a rare word becomes several pieces; the later ones start with ##), Chinese "
              "gets one id per character. Sentences end with <eos>; the decoder's input starts with "
              "<bos>.",
    },
    "tokens.english": {"zh": "英文子词与编号", "en": "English pieces and their ids"},
    "tokens.chinese": {"zh": "中文字符与编号（模型自己的译文）",
                       "en": "Chinese characters and their ids (the model's own translation)"},
    "tokens.specials": {"zh": "特殊词元", "en": "Special tokens"},
    "tokens.special.pad": {"zh": "填充：把短句补到和批里最长的一样长，注意力会把它屏蔽掉",
                           "en": "padding: fills short sentences up to the longest in the batch; "
                                 "attention masks it out"},
    "tokens.special.bos": {"zh": "开始：解码器的第一个输入，表示“开始写吧”",
                           "en": "begin: the decoder's first input, meaning “start writing”"},
    "tokens.special.eos": {"zh": "结束：源句末尾加一个；解码器生成它时翻译结束",
                           "en": "end: closes every source sentence; when the decoder writes it, "
                                 "the translation is over"},
    "tokens.special.unk": {"zh": "未知：词表里没有的字或片段", "en": "unknown: a character or "
                                                                      "piece the vocabulary lacks"},
    "tokens.batch": {"zh": "一个小批次（你的句子 + 两句别的）", "en": "A mini-batch (your sentence "
                                                                   "+ two others)"},
    "tokens.batch_intro": {
        "zh": "训练时一次处理很多句子，它们必须排成一个矩形，所以短句后面补 <pad>。"
              "训练脚本会把长度相近的句子放进同一批，尽量少补。",
        "en": "Training processes many sentences at once, and they must form a rectangle, so "
              "shorter ones are filled with <pad>. The training script groups sentences of similar "
              "length so that little padding is needed.",
    },
    "tokens.row": {"zh": "第 {n} 句", "en": "sentence {n}"},
    "tokens.yours": {"zh": "你的句子", "en": "yours"},
    "tokens.source_batch": {"zh": "编码器输入（英文）", "en": "Encoder input (English)"},
    "tokens.decoder_batch": {"zh": "解码器输入（<bos> + 中文）",
                             "en": "Decoder input (<bos> + Chinese)"},
    "tokens.label_batch": {"zh": "标签（中文 + <eos>，即输入左移一位）",
                           "en": "Labels (Chinese + <eos>: the input shifted left by one)"},
    "tokens.pad": {"zh": "<pad>（灰）", "en": "<pad> (grey)"},
    "tokens.masks": {"zh": "三种掩码", "en": "Three masks"},
    "tokens.masks_intro": {
        "zh": "掩码决定“谁可以看谁”：蓝色格子允许注意，深色格子在 softmax 之前被设成 −∞，权重变成 0。"
              "选一句看它的掩码：",
        "en": "A mask decides who may look at whom: blue cells may attend, dark cells are set to "
              "−∞ before the softmax, so their weight becomes 0. Pick a sentence to see its masks:",
    },
    "tokens.mask.padding": {"zh": "填充掩码（编码器自注意力）",
                            "en": "Padding mask (encoder self-attention)"},
    "tokens.mask.causal": {"zh": "因果掩码（解码器自注意力）",
                           "en": "Causal mask (decoder self-attention)"},
    "tokens.mask.cross": {"zh": "交叉注意力掩码", "en": "Cross-attention mask"},
    "tokens.mask.padding_blocks": {
        "zh": "挡住：<pad> 列。补出来的位置不是真的词，谁都不该看它。",
        "en": "Blocks: the <pad> columns. Filler positions are not words; nobody should read them.",
    },
    "tokens.mask.causal_blocks": {
        "zh": "挡住：对角线右上方（未来的字）以及中文的 <pad>。训练时整句答案都在输入里，"
              "不挡住的话模型会直接“偷看”下一个字。",
        "en": "Blocks: everything above the diagonal (future characters) and the Chinese <pad>. "
              "In training the whole answer is in the input; without this mask the model would "
              "simply peek at the next character.",
    },
    "tokens.mask.cross_blocks": {
        "zh": "挡住：英文的 <pad> 列。每个中文位置可以看整句英文，但不看填充。",
        "en": "Blocks: the English <pad> columns. Every Chinese position may read the whole English "
              "sentence, but not its filler.",
    },
    "tokens.allowed": {"zh": "允许", "en": "may attend"},
    "tokens.blocked": {"zh": "屏蔽", "en": "blocked"},
    "tokens.query": {"zh": "查询", "en": "query"},
    "tokens.key": {"zh": "键", "en": "key"},
    "tokens.wasted": {"zh": "这一批里 {pad} / {total} 个位置是填充。",
                      "en": "{pad} of the {total} positions in this batch are padding."},
    "tokens.piece": {"zh": "词元", "en": "token"},
    "tokens.id": {"zh": "编号", "en": "id"},
    # ------------------------------------------------------------------------------ /embeddings
    "emb.title": {"zh": "词嵌入与位置编码", "en": "Embeddings and positions"},
    "emb.intro": {
        "zh": "每个编号查表得到一个 {d} 维向量（词嵌入），乘以 √{d} ≈ {sqrt}，再加上同样长度的位置编码。"
              "下面的数字都取自这个模型的嵌入表和它对你句子的实际计算。",
        "en": "Each id looks up a row of {d} numbers (its embedding), which is multiplied by "
              "√{d} ≈ {sqrt} and added to a positional encoding of the same length. The numbers "
              "below come from this model's tables and its real computation on your sentence.",
    },
    "emb.tokens": {"zh": "词嵌入 × √d_model（词元 × 维度）",
                   "en": "Token embedding × √d_model (tokens × dimensions)"},
    "emb.positions_sentence": {"zh": "位置编码（这句话的位置）",
                               "en": "Positional encoding (this sentence's positions)"},
    "emb.sum": {"zh": "相加：编码器的真正输入", "en": "Their sum: what the encoder really reads"},
    "emb.scaling": {"zh": "为什么乘 √d_model", "en": "Why multiply by √d_model"},
    "emb.scaling_text": {
        "zh": "嵌入表初始化时每个数大约是 1/√d 大小，整行向量长度约为 1；"
              "而位置编码每一行长度是 √(d/2) ≈ {pe}。"
              "乘以 √d 以后，词的信息和位置信息大小相当，谁也不会淹没谁。下图是每个词元各部分的长度。",
        "en": "The embedding table starts with entries of size about 1/√d, so a row has length about 1, "
              "while every row of the positional encoding has length √(d/2) ≈ {pe}. Multiplying by √d "
              "puts word and position on a similar scale, so neither drowns the other. The chart shows "
              "each part's length per token.",
    },
    "emb.norm.raw": {"zh": "查表得到的原始向量", "en": "raw embedding row"},
    "emb.norm.scaled": {"zh": "× √d 以后", "en": "after × √d"},
    "emb.norm.position": {"zh": "位置编码", "en": "positional encoding"},
    "emb.norm.sum": {"zh": "相加之和", "en": "sum"},
    "emb.pe_title": {"zh": "正弦位置编码表", "en": "The sinusoidal position table"},
    "emb.pe_formula": {
        "zh": "偶数维用正弦、奇数维用余弦，频率从高到低：左边的维度变化快，右边的维度变化慢，"
              "像一个由许多指针组成的钟。",
        "en": "Even dimensions use sine, odd ones cosine, with frequencies from fast to slow: the "
              "left dimensions change quickly, the right ones slowly, like a clock with many hands.",
    },
    "emb.pe_heatmap": {"zh": "位置 × 维度（前 {n} 个位置）", "en": "positions × dimensions "
                                                                   "(first {n} positions)"},
    "emb.cosine": {"zh": "位置之间的余弦相似度", "en": "Cosine similarity between positions"},
    "emb.cosine_text": {
        "zh": "相似度只取决于两个位置相差多少，而不是它们在哪：每条与对角线平行的斜线颜色都一样。"
              "原因是 PE(p+k) 可以由 PE(p) 经过一个只依赖 k 的旋转得到，"
              "所以模型很容易从两个向量里读出相对距离。",
        "en": "Similarity depends only on how far apart two positions are, not where they are: every "
              "line parallel to the diagonal has one colour. The reason: PE(p+k) is PE(p) turned by a "
              "rotation that depends on k alone, so the distance between two positions is easy for "
              "the model to read off.",
    },
    "emb.offset": {"zh": "从不同起点出发，相差 k 个位置时的相似度（曲线重合）",
                   "en": "Similarity at offset k from different starting positions (the curves "
                         "coincide)"},
    "emb.offset_axis": {"zh": "相差 k", "en": "offset k"},
    "emb.offset_name": {"zh": "起点 {p}", "en": "from position {p}"},
    "emb.projection": {"zh": "上下文混合：每层之后的词向量（二维投影）",
                       "en": "Context mixing: the token vectors after each layer (2-D projection)"},
    "emb.projection_text": {
        "zh": "把输入和每个编码器层输出的 {d} 维向量投影到同一个二维平面（主成分分析）。"
              "输入时向量只代表“这个词在这个位置”；经过自注意力层层混合后，每个点都带上了整句的信息。",
        "en": "The {d}-dimensional vectors at the input and after each encoder layer, projected onto "
              "one shared plane (principal components). At the input a vector only says “this word "
              "at this position”; layer by layer, self-attention mixes the whole sentence into every "
              "point.",
    },
    "emb.input": {"zh": "输入", "en": "input"},
    "emb.after_layer": {"zh": "第 {n} 层后", "en": "after layer {n}"},
    "emb.coref_link": {"zh": "代词“她”在看谁？看测量结果 →",
                       "en": "Who does “she” look at? See the measurement →"},
    # ----------------------------------------------------------------------------- /coreference
    "coref.title": {"zh": "自注意力的直觉：代词指向谁", "en": "Self-attention intuition: whom a "
                                                               "pronoun points to"},
    "coref.intro": {
        "zh": "读到“she”时，人会自动想到前面提过的那位女士。模型有没有哪个注意力头在做同样的事？"
              "这里不做假设，而是测量：取编码器每层每个头里代词那一行，"
              "看它分给所指名词的权重，从高到低排序。",
        "en": "Reading “she”, a person thinks of the woman mentioned earlier. Does any attention head "
              "of this model do the same? Rather than claim it, we measure it: for every encoder "
              "layer and head, take the pronoun's row and read the weight it puts on the noun it "
              "refers to, then rank the heads.",
    },
    "coref.examples": {"zh": "例句", "en": "Examples"},
    "coref.pronoun": {"zh": "代词", "en": "pronoun"},
    "coref.referent": {"zh": "所指名词", "en": "referent"},
    "coref.distractor": {"zh": "干扰名词（可空）", "en": "distractor (optional)"},
    "coref.measure": {"zh": "测量", "en": "Measure"},
    "coref.grid": {"zh": "代词分给所指名词的权重（每层 × 每个头）",
                   "en": "Weight from the pronoun onto the referent (layer × head)"},
    "coref.uniform": {
        "zh": "作为参照：如果一个头平均地看所有 {n} 个词元，所指名词会得到 {u}。",
        "en": "For reference: a head spreading its attention evenly over the {n} tokens would give "
              "the referent {u}.",
    },
    "coref.ranking": {"zh": "排名", "en": "Ranking"},
    "coref.rank": {"zh": "名次", "en": "rank"},
    "coref.weight": {"zh": "权重", "en": "weight"},
    "coref.distractor_weight": {"zh": "干扰名词权重", "en": "distractor weight"},
    "coref.referent_rank": {"zh": "所指名词在全句中的名次", "en": "referent's place among words"},
    "coref.top_word": {"zh": "看得最多的词", "en": "most-watched word"},
    "coref.best_row": {"zh": "排名第一的头：代词那一行的完整分布",
                       "en": "The top head: the pronoun's whole row"},
    "coref.caveat": {
        "zh": "这是一个小型翻译模型，没有专门学过指代关系；如果最好的头也只比平均水平高一点，"
              "那就是真实的测量结果。大模型里常能找到更明显的“指代头”。",
        "en": "This is a small translation model that was never taught coreference; if even the "
              "best head is only a little above the even spread, that is what was measured. Large "
              "models often have much clearer “coreference heads”.",
    },
    # -------------------------------------------------------------------------------- /training
    "training.title": {"zh": "模型是怎么学会的", "en": "How the model learned"},
    "training.intro": {
        "zh": "训练时把正确答案整句交给解码器（教师强制），让它在每个位置预测下一个字，"
              "再用交叉熵衡量它错了多少。这里用你给的一对句子真的算一次损失和梯度——"
              "只算不改，模型不会被更新。",
        "en": "In training the decoder is handed the whole correct answer (teacher forcing) and asked "
              "to predict the next character at every position; cross-entropy measures how wrong it "
              "was. Here the loss and gradient are really computed on your sentence pair — computed "
              "only: the model is not updated.",
    },
    "training.reference": {"zh": "参考译文（中文）", "en": "Reference (Chinese)"},
    "training.reference_hint": {
        "zh": "默认是模型自己的译文；改成别的译法看看损失怎么变。最多 200 字。",
        "en": "Pre-filled with the model's own translation; change it and watch the loss move. "
              "Up to 200 characters.",
    },
    "training.score": {"zh": "计算损失", "en": "Compute the loss"},
    "training.shift": {"zh": "输入与标签：右移一位", "en": "Input and labels: shifted by one"},
    "training.shift_text": {
        "zh": "解码器在位置 t 看到的是 <bos> 和前 t 个正确答案，要预测的标签是第 t+1 个。"
              "下表每一列是一个位置。",
        "en": "At position t the decoder sees <bos> and the first t correct characters; its label is "
              "the next one. Each column below is one position.",
    },
    "training.row.input": {"zh": "解码器输入", "en": "decoder input"},
    "training.row.label": {"zh": "标签", "en": "label"},
    "training.row.predicted": {"zh": "教师强制下的预测", "en": "prediction (teacher forcing)"},
    "training.row.prob": {"zh": "p(标签)", "en": "p(label)"},
    "training.row.ce": {"zh": "交叉熵 −log p", "en": "cross-entropy −log p"},
    "training.row.free": {"zh": "自由生成（贪心）", "en": "free-running (greedy)"},
    "training.prob": {"zh": "正确标签的概率", "en": "probability of the right label"},
    "training.ce": {"zh": "交叉熵", "en": "cross-entropy"},
    "training.loss": {
        "zh": "平均交叉熵 {loss}（加标签平滑 {ls} 后 {smoothed}）。",
        "en": "Mean cross-entropy {loss} ({smoothed} with label smoothing {ls}).",
    },
    "training.grad": {
        "zh": "梯度范数 {norm}；按 {clip} 裁剪后为 {clipped}。",
        "en": "Gradient norm {norm}; clipped to {clip} it becomes {clipped}.",
    },
    "training.grad_text": {
        "zh": "一次反向传播得到所有参数的梯度。范数超过 {clip} 就按比例整体缩小，"
              "这样偶尔出现的超大梯度不会把训练带偏。",
        "en": "One backward pass gives the gradient of every parameter. If its norm exceeds {clip}, "
              "the whole gradient is scaled down, so an occasional huge gradient cannot throw "
              "training off course.",
    },
    "training.unknown": {"zh": "词表里没有这些字，按 <unk> 计算：", "en": "Not in the vocabulary, "
                                                                        "scored as <unk>: "},
    "training.teacher": {"zh": "教师强制与自由生成", "en": "Teacher forcing vs free running"},
    "training.teacher_text": {
        "zh": "教师强制时，每个位置的输入都是正确答案，哪怕模型上一步猜错了；真正翻译时，"
              "模型只能读自己写过的字，"
              "一步错可能步步错。两行相同的地方说明两种方式一致。",
        "en": "With teacher forcing every position's input is the correct answer, even where the "
              "model guessed wrong one step earlier; when really translating, the model reads only "
              "what it wrote itself, so one slip can lead to more. Where the two rows agree, so do "
              "the two modes.",
    },
    "training.schedule": {"zh": "学习率预热", "en": "Learning-rate warmup"},
    "training.schedule_text": {
        "zh": "lr = d_model^−0.5 × min(step^−0.5, step × warmup^−1.5)：前 {warmup} 步线性升高，"
              "之后按 1/√step 慢慢下降。一开始参数是随机的，梯度方向不可靠，小步走更稳。"
              "曲线用这个模型的 d_model = {d}；点是训练时真正记录下的学习率。",
        "en": "lr = d_model^−0.5 × min(step^−0.5, step × warmup^−1.5): a linear rise for the first "
              "{warmup} steps, then a slow 1/√step decay. At first the weights are random and the "
              "gradient's direction is unreliable, so small steps are safer. The curve uses this "
              "model's d_model = {d}; the dots are the rates actually logged during training.",
    },
    "training.schedule_names": {"zh": "公式|训练记录|预热步数", "en": "formula|logged|warmup"},
    "training.curves": {"zh": "这个模型的真实训练曲线", "en": "This model's real training curves"},
    "training.curves_text": {
        "zh": "每 25 步记录一次的损失（带标签平滑）和裁剪前的梯度范数；虚线是裁剪阈值。",
        "en": "Loss (with label smoothing) and gradient norm before clipping, logged every 25 steps; "
              "the dotted line is the clipping threshold.",
    },
    "training.epochs": {"zh": "每轮结束后在开发集上的 BLEU / chrF",
                        "en": "Dev-set BLEU / chrF after every epoch"},
    "training.loss_name": {"zh": "损失", "en": "loss"},
    "training.grad_name": {"zh": "梯度范数", "en": "grad norm"},
    "training.train_loss": {"zh": "训练损失", "en": "train loss"},
    "training.epoch": {"zh": "轮次", "en": "epoch"},
    "training.no_history": {"zh": "这个检查点没有训练记录（history.json）。",
                            "en": "This checkpoint has no training history (history.json)."},
    # -------------------------------------------------------------------------------- /kv-cache
    "kv.title": {"zh": "KV 缓存：为什么要缓存", "en": "The KV cache: why caching matters"},
    "kv.intro": {
        "zh": "解码器每写一个字，都要让新位置去注意之前所有位置的 K 和 V。旧位置的 K、V 不会再变，"
              "所以可以存起来（缓存），每步只为新位置计算一次。下面在这台机器上真的跑两遍："
              "一遍用缓存，一遍每步把整个前缀重新算一遍。",
        "en": "Each time the decoder writes a character, the new position attends to the keys and "
              "values of every earlier position. Those old K and V never change, so they can be "
              "stored (cached) and only the new position computed at each step. Below, this machine "
              "really runs both: once with the cache, once recomputing the whole prefix every step.",
    },
    "kv.steps": {"zh": "生成步数", "en": "Steps to generate"},
    "kv.run": {"zh": "开始比赛", "en": "Run the race"},
    "kv.summary": {
        "zh": "{steps} 步：用缓存 {cached} 毫秒，不用缓存 {uncached} 毫秒（{ratio} 倍）。",
        "en": "{steps} steps: {cached} ms with the cache, {uncached} ms without ({ratio}×).",
    },
    "kv.identical": {"zh": "两种方式生成的字完全相同：", "en": "Both runs produced exactly the "
                                                                "same tokens: "},
    "kv.different": {"zh": "两种方式的结果不同（不应该发生）：", "en": "The two runs differ (this "
                                                                        "should not happen): "},
    "kv.eos_note": {
        "zh": "为了让两边都跑满步数，这里禁止生成 <eos>，所以译文结束后模型会继续写下去。",
        "en": "So that both runs do every step, <eos> is suppressed here: the model keeps writing "
              "after the translation would have ended.",
    },
    "kv.timing": {"zh": "每生成一个字所用时间", "en": "Time per generated token"},
    "kv.work": {"zh": "每一步送进解码器的位置数", "en": "Positions pushed through the decoder "
                                                              "per step"},
    "kv.cached": {"zh": "用缓存", "en": "with cache"},
    "kv.uncached": {"zh": "不用缓存", "en": "without cache"},
    "kv.grid_cached": {"zh": "用缓存：每步只新算一行 K、V",
                       "en": "With the cache: one new K/V row per step"},
    "kv.grid_uncached": {"zh": "不用缓存：每步重算所有行",
                         "en": "Without: every row recomputed every step"},
    "kv.fresh": {"zh": "本步计算", "en": "computed this step"},
    "kv.reused": {"zh": "从缓存读取", "en": "read from the cache"},
    "kv.rows": {
        "zh": "第 n 步时，每层自注意力的缓存有 n 行 K 和 n 行 V，每行 {d} 个数，"
              "即每层 2 × {d} × n 个数（交叉注意力的 K、V 来自编码器，只算一次）。",
        "en": "At step n each layer's self-attention cache holds n rows of K and n rows of V, {d} "
              "numbers each: 2 × {d} × n numbers per layer (the cross-attention K and V come from "
              "the encoder and are computed once).",
    },
    "kv.complexity": {
        "zh": "常说的“O(n²) → O(n)”是一种简化：它指的是生成 n 个字时需要重新计算的位置总数——"
              "不缓存是 1+2+…+n，缓存后是 n。新位置仍然要和所有旧位置做注意力，"
              "所以每步的注意力计算还是随长度增长；在这个小模型上，固定开销往往占大头，"
              "实测倍数会小于理论值。",
        "en": "The familiar “O(n²) → O(n)” is a simplification: it counts the positions recomputed "
              "while generating n tokens — 1+2+…+n without a cache, n with one. The new position "
              "still attends to every old one, so each step's attention still grows with length; "
              "on a model this small fixed overheads often dominate, and the measured speed-up is "
              "smaller than the count suggests.",
    },
    "kv.ms": {"zh": "毫秒", "en": "ms"},
    "kv.positions": {"zh": "位置数", "en": "positions"},
    # ----------------------------------------------------------------------------------- /scale
    "scale.title": {"zh": "从这个模型到 GPT-4", "en": "From this model to GPT-4"},
    "scale.intro": {
        "zh": "架构几乎一样，差别主要在尺寸：层数、宽度、头数、前馈层和词表。"
              "用下面的计算器算一算每个矩阵有多大。",
        "en": "The architecture is nearly the same; what changes is size: layers, width, heads, the "
              "feed-forward layer and the vocabulary. The calculator below works out how big every "
              "matrix is.",
    },
    "scale.table": {"zh": "GPT 系列的规模", "en": "The GPT family's sizes"},
    "scale.col.model": {"zh": "模型", "en": "model"},
    "scale.col.params": {"zh": "参数量", "en": "parameters"},
    "scale.col.layers": {"zh": "层数", "en": "layers"},
    "scale.col.d_model": {"zh": "隐藏维度", "en": "d_model"},
    "scale.col.heads": {"zh": "头数", "en": "heads"},
    "scale.col.d_ff": {"zh": "前馈维度", "en": "d_ff"},
    "scale.col.context": {"zh": "上下文长度", "en": "context"},
    "scale.col.computed": {"zh": "计算器结果", "en": "calculator"},
    "scale.this_model": {"zh": "本模型", "en": "this model"},
    "scale.gpt4_note": {
        "zh": "GPT-4 的结构从未公开，这一行是流传的估计，并假设了混合专家结构；请只当作量级参考。",
        "en": "GPT-4's architecture was never published; its row is a circulated estimate assuming "
              "a mixture of experts. Treat it as an order of magnitude only.",
    },
    "scale.calculator": {"zh": "参数计算器", "en": "Parameter calculator"},
    "scale.calc_intro": {
        "zh": "计算在服务器上进行（/api/scale），和测试里核对真实参数张量的是同一份代码。",
        "en": "The arithmetic runs on the server (/api/scale), the same code the tests check "
              "against the real parameter tensors.",
    },
    "scale.preset": {"zh": "预设", "en": "Preset"},
    "scale.architecture": {"zh": "结构", "en": "Architecture"},
    "scale.arch.decoder_only": {"zh": "仅解码器（GPT）", "en": "decoder-only (GPT)"},
    "scale.arch.encoder_decoder": {"zh": "编码器-解码器（本模型）",
                                   "en": "encoder-decoder (this model)"},
    "scale.field.vocab": {"zh": "词表大小", "en": "vocabulary"},
    "scale.field.target_vocab": {"zh": "目标词表（编码器-解码器）",
                                 "en": "target vocabulary (enc-dec)"},
    "scale.field.d_model": {"zh": "d_model", "en": "d_model"},
    "scale.field.layers": {"zh": "层数（每个堆叠）", "en": "layers (per stack)"},
    "scale.field.heads": {"zh": "头数", "en": "heads"},
    "scale.field.d_ff": {"zh": "前馈维度 d_ff", "en": "d_ff"},
    "scale.field.context": {"zh": "上下文长度", "en": "context"},
    "scale.field.experts": {"zh": "专家数（MoE）", "en": "experts (MoE)"},
    "scale.field.active_experts": {"zh": "每个词元激活的专家", "en": "active experts per token"},
    "scale.field.biases": {"zh": "计入偏置和 LayerNorm", "en": "count biases and LayerNorms"},
    "scale.compute": {"zh": "计算", "en": "Compute"},
    "scale.col.matrix": {"zh": "矩阵", "en": "matrix"},
    "scale.col.shape": {"zh": "形状", "en": "shape"},
    "scale.col.per_layer": {"zh": "每层", "en": "per layer"},
    "scale.col.times": {"zh": "份数", "en": "copies"},
    "scale.col.total": {"zh": "合计", "en": "total"},
    "scale.total": {"zh": "总参数量", "en": "Total parameters"},
    "scale.weights_only": {"zh": "只算权重矩阵", "en": "weight matrices only"},
    "scale.active": {"zh": "每个词元实际用到", "en": "used per token"},
    "scale.flops": {"zh": "每个词元约需浮点运算", "en": "≈ floating-point operations per token"},
    "scale.kv_per_token": {"zh": "每个词元的 KV 缓存（个数）",
                           "en": "KV cache per token (numbers)"},
    "scale.d_head": {"zh": "每个头的维度 d_k", "en": "head size d_k"},
    "scale.row.token_embedding": {"zh": "词嵌入", "en": "token embedding"},
    "scale.row.position_embedding": {"zh": "可学习的位置嵌入", "en": "learned position embedding"},
    "scale.row.source_embedding": {"zh": "英文嵌入", "en": "source embedding"},
    "scale.row.target_embedding": {"zh": "中文嵌入", "en": "target embedding"},
    "scale.row.position_encoding": {"zh": "正弦位置编码（无参数）",
                                    "en": "sinusoidal positions (no parameters)"},
    "scale.row.qkv": {"zh": "Q、K、V 投影", "en": "Q, K, V projections"},
    "scale.row.out": {"zh": "注意力输出投影", "en": "attention output projection"},
    "scale.row.cross_qkv": {"zh": "交叉注意力 Q、K、V", "en": "cross-attention Q, K, V"},
    "scale.row.cross_out": {"zh": "交叉注意力输出投影", "en": "cross-attention output projection"},
    "scale.row.ffn": {"zh": "前馈网络 W₁、W₂", "en": "feed-forward W₁, W₂"},
    "scale.row.layer_norm": {"zh": "LayerNorm", "en": "LayerNorm"},
    "scale.row.final_norm": {"zh": "最后的 LayerNorm", "en": "final LayerNorm"},
    "scale.row.output_projection": {"zh": "输出层（与嵌入共享，只剩偏置）",
                                    "en": "output layer (tied to the embedding; bias only)"},
    "scale.group.embedding": {"zh": "嵌入", "en": "embedding"},
    "scale.group.encoder": {"zh": "编码器", "en": "encoder"},
    "scale.group.decoder": {"zh": "解码器", "en": "decoder"},
    "scale.group.output": {"zh": "输出", "en": "output"},
    "scale.breakdown": {"zh": "参数都在哪里（对数坐标）", "en": "Where the parameters are (log "
                                                                "scale)"},
    "scale.gpt3_check": {
        "zh": "GPT-3 核对：词嵌入 50257 × 12288 ≈ 6.18 亿；每层 Q、K、V 3 × 12288² ≈ 4.53 亿；"
              "输出投影 12288² ≈ 1.51 亿；前馈 2 × 12288 × 49152 ≈ 12.08 亿；96 层合计约 1750 亿。",
        "en": "GPT-3 check: embedding 50257 × 12288 ≈ 618M; per layer Q, K, V 3 × 12288² ≈ 453M, "
              "output projection 12288² ≈ 151M, feed-forward 2 × 12288 × 49152 ≈ 1.21B; over 96 "
              "layers about 175B in all.",
    },
    "scale.this_check": {
        "zh": "本模型按同样的公式（加上偏置、LayerNorm 和共享的输出层）得到 {total} 个参数，"
              "与真实参数张量逐个相加的结果一致。",
        "en": "With the same formulas (plus biases, LayerNorms and the tied output layer) this model "
              "has {total} parameters — the same as adding up its real parameter tensors.",
    },
    "scale.chatgpt": {"zh": "ChatGPT 的三个训练阶段", "en": "ChatGPT's three training stages"},
    "scale.stage.pretrain.title": {"zh": "0. 预训练", "en": "0. Pre-training"},
    "scale.stage.pretrain.text": {
        "zh": "在海量网页和书籍上做“预测下一个词元”，学到语言和世界知识。这是前提，本身还不会按指令对话。",
        "en": "Next-token prediction over an enormous amount of web text and books: language and "
              "world knowledge. The starting point — it does not yet follow instructions.",
    },
    "scale.stage.sft.title": {"zh": "1. 监督微调（SFT）", "en": "1. Supervised fine-tuning (SFT)"},
    "scale.stage.sft.text": {
        "zh": "请人写出提示和理想回答，在这些示范上继续训练，模型学会对话格式和听从指令。",
        "en": "People write prompts and ideal answers; training continues on these demonstrations, "
              "and the model learns the dialogue format and to follow instructions.",
    },
    "scale.stage.rm.title": {"zh": "2. 奖励模型", "en": "2. Reward model"},
    "scale.stage.rm.text": {
        "zh": "让模型对同一问题给出几个回答，由人排序；再训练一个模型去预测人会更喜欢哪一个，输出一个分数。",
        "en": "The model answers the same prompt several times and people rank the answers; a "
              "second model is trained to predict which one people prefer, as a score.",
    },
    "scale.stage.ppo.title": {"zh": "3. 强化学习（PPO）", "en": "3. Reinforcement learning (PPO)"},
    "scale.stage.ppo.text": {
        "zh": "用奖励模型的分数当奖励，用 PPO 调整对话模型；同时用 KL 惩罚把它拴在 SFT 模型附近，"
              "防止为了刷分而跑偏。",
        "en": "The reward model's score becomes the reward and PPO adjusts the chat model, while a "
              "KL penalty keeps it close to the SFT model so it cannot drift off just to win points.",
    },
    "scale.design": {"zh": "为什么这样设计？", "en": "Why is it built this way?"},
    "scale.design.deep.q": {"zh": "为什么要很多层？", "en": "Why so many layers?"},
    "scale.design.deep.a": {
        "zh": "每一层都能在上一层的结果上再组合一次，层数越多，能表达的关系就越抽象；"
              "残差连接让很深的网络也能训练。本模型只有 {n} 层。",
        "en": "Each layer recombines what the previous one produced, so more layers can express "
              "more abstract relations; residual connections keep very deep stacks trainable. This "
              "model has {n}.",
    },
    "scale.design.wide.q": {"zh": "为什么 d_model 要大？", "en": "Why a large d_model?"},
    "scale.design.wide.a": {
        "zh": "每个词元的向量就是它携带的全部信息，越宽能装下的特征越多。参数量大约随 d_model² 增长，"
              "所以加宽很贵。",
        "en": "A token's vector is all the information it carries; a wider one holds more features. "
              "Parameters grow roughly with d_model², so width is expensive.",
    },
    "scale.design.ffn.q": {"zh": "为什么前馈层是 4 倍宽？", "en": "Why is the FFN 4× wider?"},
    "scale.design.ffn.a": {
        "zh": "前馈层先展开到更高维、经过非线性再压回来，是每层参数最多的部分，常被看作存放知识的地方。"
              "4 倍是原论文的经验选择，不是定律；本模型用 {ff} = {ratio} × {d}。",
        "en": "The FFN expands to a higher dimension, applies a non-linearity and projects back; it "
              "holds most of each layer's parameters and is often seen as where knowledge is stored. "
              "4× is the original paper's practical choice, not a law; this model uses {ff} = "
              "{ratio} × {d}.",
    },
    "scale.design.heads.q": {"zh": "为什么要很多头？", "en": "Why many heads?"},
    "scale.design.heads.a": {
        "zh": "把 d_model 切成几份，每个头在自己的子空间里独立地决定看谁，一个头可以追踪语法，"
              "另一个追踪位置。"
              "总计算量不变：头数 × 每头维度 = d_model。",
        "en": "d_model is split into parts and each head decides on its own, in its own subspace, "
              "what to look at — one may track grammar, another position. The cost stays the same: "
              "heads × head size = d_model.",
    },
    "scale.design.rlhf.q": {"zh": "为什么需要 RLHF？", "en": "Why RLHF?"},
    "scale.design.rlhf.a": {
        "zh": "预训练只让模型写得“像网上的文字”，并不保证有用或安全；人类偏好反馈把它往有帮助、诚实、"
              "无害的方向拉。",
        "en": "Pre-training only teaches text that looks like the web, which is not the same as "
              "helpful or safe; feedback from human preferences pulls it toward helpful, honest and "
              "harmless answers.",
    },
    "scale.design.moe.q": {"zh": "为什么用混合专家（MoE）？", "en": "Why a mixture of experts?"},
    "scale.design.moe.a": {
        "zh": "把前馈层换成很多个“专家”，每个词元只交给其中少数几个。总参数可以很大，"
              "每个词元的计算量却只随被选中的专家增长。"
              "计算器里的“专家数”可以试试看。",
        "en": "The FFN is replaced by many “experts” and each token is routed to only a few. Total "
              "parameters can be huge while the work per token grows only with the experts chosen. "
              "Try the calculator's expert fields.",
    },
    "scale.improvements": {"zh": "后来的改进方向", "en": "Improvements since"},
    "scale.imp.efficiency": {"zh": "注意力更快、更省", "en": "Faster, leaner attention"},
    "scale.imp.positions": {"zh": "位置信息", "en": "Position information"},
    "scale.imp.architecture": {"zh": "结构变化", "en": "Architecture changes"},
    "scale.imp.long_context": {"zh": "更长的上下文", "en": "Longer context"},
    "scale.imp.multimodal": {"zh": "多模态", "en": "Beyond text"},
    "scale.imp.flash": {"zh": "Flash Attention：分块计算、不把整个注意力矩阵写回显存，结果相同但快得多。",
                        "en": "Flash Attention: computes attention in tiles without writing the "
                              "full matrix to memory — same result, much faster."},
    "scale.imp.sparse": {"zh": "稀疏注意力（Longformer、BigBird）：每个位置只看局部窗口和少数全局位置。",
                         "en": "Sparse attention (Longformer, BigBird): each position reads a local "
                               "window plus a few global positions."},
    "scale.imp.linear": {"zh": "线性注意力（Performer 等）：用核函数近似 softmax，代价随长度线性增长。",
                         "en": "Linear attention (Performer and others): approximates the softmax "
                               "with kernels so cost grows linearly with length."},
    "scale.imp.gqa": {"zh": "分组查询注意力（GQA）：几个查询头共用一组 K、V，KV 缓存成倍变小。",
                      "en": "Grouped-query attention (GQA): several query heads share one set of "
                            "K and V, shrinking the KV cache several times."},
    "scale.imp.rope": {"zh": "RoPE：把位置做成对 Q、K 的旋转，点积自然只依赖相对距离。",
                       "en": "RoPE: position becomes a rotation of Q and K, so their dot product "
                             "depends only on relative distance."},
    "scale.imp.alibi": {"zh": "ALiBi：不加位置向量，而是按距离给注意力分数减去一个线性惩罚。",
                        "en": "ALiBi: no position vectors; attention scores get a penalty growing "
                              "linearly with distance."},
    "scale.imp.relative": {"zh": "相对位置编码（T5、DeBERTa）：直接学习“相差几个位置”的偏置。",
                           "en": "Relative position encodings (T5, DeBERTa): learn a bias for "
                                 "“how many positions apart”."},
    "scale.imp.ntk": {"zh": "NTK 感知插值：调整 RoPE 的频率，让模型读比训练时更长的文本。",
                      "en": "NTK-aware interpolation: rescales RoPE's frequencies so a model reads "
                            "longer text than it was trained on."},
    "scale.imp.prenorm": {"zh": "Pre-Norm：LayerNorm 放到子层之前，"
                                "深层网络更容易训练（本模型用原论文的 Post-Norm）。",
                          "en": "Pre-norm: LayerNorm before each sub-layer makes deep stacks easier "
                                "to train (this model keeps the paper's post-norm)."},
    "scale.imp.swiglu": {"zh": "SwiGLU / GeGLU：带门控的前馈层，代替 ReLU。",
                         "en": "SwiGLU / GeGLU: gated feed-forward layers instead of ReLU."},
    "scale.imp.moe": {"zh": "MoE：稀疏激活的专家层，用更多参数换更少的每词计算。",
                      "en": "MoE: sparsely activated expert layers — more parameters, less work "
                            "per token."},
    "scale.imp.decoder_only": {"zh": "仅解码器：GPT、LLaMA 去掉编码器，把输入和输出放进同一个序列。",
                               "en": "Decoder-only: GPT and LLaMA drop the encoder and put input "
                                     "and output in one sequence."},
    "scale.imp.interpolation": {"zh": "位置插值：把长位置压缩进训练过的范围，再稍加微调。",
                                "en": "Position interpolation: squeeze long positions into the "
                                      "trained range, then fine-tune briefly."},
    "scale.imp.sliding": {"zh": "滑动窗口注意力（如 Mistral）：每层只看最近的一段，层层叠加看得更远。",
                          "en": "Sliding-window attention (e.g. Mistral): each layer sees a recent "
                                "window; stacked layers reach further."},
    "scale.imp.ring": {"zh": "Ring Attention：把超长序列分到多台设备上轮流传递 K、V。",
                       "en": "Ring attention: splits a very long sequence across devices that pass "
                             "K and V around a ring."},
    "scale.imp.memory": {"zh": "压缩记忆（Transformer-XL 一类）：把更早的内容压缩后继续参与注意力。",
                         "en": "Compressed memory (Transformer-XL and kin): older context is "
                               "compressed and still attended to."},
    "scale.imp.vit": {"zh": "ViT：把图片切成小块，当作词元送进 Transformer。",
                      "en": "ViT: an image cut into patches, treated as tokens."},
    "scale.imp.clip": {"zh": "CLIP：让图片和文字的向量对齐到同一空间。",
                       "en": "CLIP: images and text aligned in one vector space."},
    "scale.imp.whisper": {"zh": "Whisper：编码器-解码器做语音识别，结构和本模型很像。",
                          "en": "Whisper: an encoder-decoder for speech recognition, much like "
                                "this model."},
    "scale.imp.video": {"zh": "视频生成（如 Sora）：把视频切成时空小块，用 Transformer 建模。",
                        "en": "Video generation (e.g. Sora): video cut into space-time patches "
                              "modelled by a Transformer."},
    "scale.timeline": {"zh": "时间线", "en": "Timeline"},
    "scale.time.2017": {"zh": "2017 — 《Attention Is All You Need》：只用注意力的编码器-解码器，"
                              "正是本模型的结构。",
                        "en": "2017 — “Attention Is All You Need”: an attention-only "
                              "encoder-decoder, the design of this very model."},
    "scale.time.2018": {"zh": "2018 — GPT 与 BERT：先在大量文本上预训练，再针对任务微调。",
                        "en": "2018 — GPT and BERT: pre-train on lots of text, then fine-tune "
                              "for a task."},
    "scale.time.2020": {"zh": "2020 — GPT-3（1750 亿参数）展示少样本能力；ViT 把 Transformer 带进图像。",
                        "en": "2020 — GPT-3 (175B parameters) shows few-shot ability; ViT brings "
                              "Transformers to images."},
    "scale.time.2022": {"zh": "2022–2023 — ChatGPT、LLaMA 与开源模型；Flash Attention 等优化普及。",
                        "en": "2022–2023 — ChatGPT, LLaMA and open models; optimisations such as "
                              "Flash Attention become standard."},
    "scale.time.2024": {"zh": "2024 起 — 多模态模型与会调用工具的智能体。",
                        "en": "2024 on — multimodal models and agents that use tools."},
    # ------------------------------------------------------------------------------------ /tour
    "tour.title": {"zh": "导览：跟着一句话走一遍", "en": "Guided tour: follow one sentence"},
    "tour.progress": {"zh": "第 {n} / {total} 站", "en": "Stop {n} of {total}"},
    "tour.back": {"zh": "← 上一站", "en": "← Back"},
    "tour.next": {"zh": "下一站 →", "en": "Next →"},
    "tour.start": {"zh": "开始", "en": "Start"},
    "tour.done": {"zh": "导览结束，可以从导航栏任选一页深入。",
                  "en": "That is the whole tour; pick any page from the navigation to go deeper."},
    "tour.stage.tokens": {"zh": "分词", "en": "Tokens"},
    "tour.stage.embedding": {"zh": "嵌入 + 位置", "en": "Embedding + position"},
    "tour.stage.encoder": {"zh": "编码器", "en": "Encoder"},
    "tour.stage.decoder": {"zh": "解码器", "en": "Decoder"},
    "tour.stage.output": {"zh": "线性 + Softmax", "en": "Linear + softmax"},
    "tour.stage.loss": {"zh": "损失与训练", "en": "Loss and training"},
    "tour.pipeline.title": {"zh": "全景", "en": "The big picture"},
    "tour.pipeline.text": {
        "zh": "一句英文进去，一句中文出来。编码器把整句英文一起读完，解码器一次写一个汉字，"
              "每写一个都回头看英文。"
              "先在总览页看看你的句子被翻译成什么。",
        "en": "English goes in, Chinese comes out. The encoder reads the whole English sentence at "
              "once; the decoder writes one character at a time, looking back at the English for "
              "each. Start on the overview page to see your sentence translated.",
    },
    "tour.tokens.title": {"zh": "1. 切分与编号", "en": "1. Pieces and ids"},
    "tour.tokens.text": {
        "zh": "文字先变成整数：英文切成子词，中文一字一号，再加上开始、结束和填充标记。"
              "一批句子补齐以后，三种掩码决定谁能看谁。",
        "en": "Text becomes integers: English is cut into sub-words, Chinese gets one id per "
              "character, plus begin, end and padding tokens. Once a batch is padded, three masks "
              "decide who may look at whom.",
    },
    "tour.embeddings.title": {"zh": "2. 向量与位置", "en": "2. Vectors and positions"},
    "tour.embeddings.text": {
        "zh": "每个编号查到一个向量，乘以 √d_model，再加上正弦位置编码——否则模型分不清词的先后。",
        "en": "Every id looks up a vector, multiplied by √d_model and added to a sinusoidal "
              "positional encoding — without it the model could not tell word order.",
    },
    "tour.attention.title": {"zh": "3. 自注意力", "en": "3. Self-attention"},
    "tour.attention.text": {
        "zh": "每个词用自己的查询去和所有词的键比较，softmax(QKᵀ/√d_k) 得到权重，再按权重把值加起来。"
              "多个头各看各的。",
        "en": "Each token compares its query with every token's key; softmax(QKᵀ/√d_k) gives the "
              "weights, which mix the values. Several heads each look in their own way.",
    },
    "tour.coreference.title": {"zh": "4. 代词在看谁", "en": "4. Whom the pronoun watches"},
    "tour.coreference.text": {
        "zh": "直觉上，“she”应该去看它指代的人。我们在这个模型里实际测量，哪些头真的这样做。",
        "en": "Intuitively “she” should look at the person it refers to. We measure which heads "
              "of this model actually do.",
    },
    "tour.training.title": {"zh": "5. 训练", "en": "5. Training"},
    "tour.training.text": {
        "zh": "教师强制：把正确答案右移一位喂给解码器，每个位置算交叉熵，反向传播，裁剪梯度，"
              "按预热学习率更新。",
        "en": "Teacher forcing: the correct answer, shifted right by one, goes into the decoder; "
              "cross-entropy at every position, back-propagation, gradient clipping, an update at "
              "the warmup learning rate.",
    },
    "tour.decode.title": {"zh": "6. 逐字解码", "en": "6. Decoding, one token at a time"},
    "tour.decode.text": {
        "zh": "翻译时从 <bos> 开始，每一步经过掩码自注意力、交叉注意力、前馈层，"
              "最后线性层加 softmax 选出下一个字。",
        "en": "Translation starts from <bos>; each step passes masked self-attention, "
              "cross-attention and the feed-forward layer, and a linear layer with softmax picks the "
              "next character.",
    },
    "tour.kv.title": {"zh": "7. KV 缓存", "en": "7. The KV cache"},
    "tour.kv.text": {
        "zh": "旧位置的 K、V 不会变，存起来就不用每步重算。在这台机器上实测两种方式的速度。",
        "en": "Old positions' K and V never change; keep them and nothing is recomputed. Measure "
              "both ways on this machine.",
    },
    "tour.scale.title": {"zh": "8. 放大到 GPT", "en": "8. Scaling up to GPT"},
    "tour.scale.text": {
        "zh": "同样的积木，堆得更高更宽，就是 GPT-3、GPT-4。用计算器算算每个矩阵有多大，"
              "再看 ChatGPT 是如何被训练成对话助手的。",
        "en": "The same building blocks, stacked higher and wider, make GPT-3 and GPT-4. Work out "
              "each matrix's size in the calculator, then see how ChatGPT was trained into an "
              "assistant.",
    },
})
