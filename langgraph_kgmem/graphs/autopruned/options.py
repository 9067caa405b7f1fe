"""AutoPrunedRetriever's options: the factory's keyword arguments, validated once, and the graph's
``context_schema``.

Every knob of retrieval, packing, answering and memorising can change per run
(``app.invoke(inputs, context={"fine_m": 5, "memorize": False})``). Fixed at build, and refused
in a run's context: ``consolidate`` (whether the consolidation node exists), ``memory_scope``
(whose codebook the graph reads and writes), and what shapes the stored, shared codebook itself —
``tau_run`` and ``phrase_facts`` (how the KG's facts are indexed into runs, once per KG version)
and ``alias_threshold``, ``entity_budget`` and ``layer2_min_cos`` (how consolidation merges its
entities): a run that changed them would rewrite memory every other caller reads.

The options, one by one:

    selection_policy: ``fn(channel, candidates, features) -> "all" | "unique" | "none"`` per
        channel ("F" facts, "Q" earlier questions, "A" known answers); default
        :func:`~langgraph_kgmem.graphs.autopruned.default_selection_policy`.
    coarse_k / fine_m: runs kept by the coarse and the fine stage.
    tau_run: run segmentation threshold (cosine to the run centroid + continuity bonus).
    w_ent / w_rel: coarse weights of the entity and relation max-cosines.
    fine: :class:`~langgraph_kgmem.graphs.autopruned.FineScoring` weights and thresholds.
    unique_threshold: whole-run cosine at which two runs count as one cluster ("unique").
    encodings: the prompt encodings to choose from (cheapest in tokens wins).
    max_prompt_tokens: drop the weakest runs until the packed codebook fits (None: no limit).
    edges_per_run: prune each selected fact run to its ``k`` edges closest to a question line
        before packing (None, the paper: whole runs). ``edges_per_run=1`` with ``fine_m=10``
        is the compact setting the docs' benchmarks page measures. Stored answer and question runs are always shown whole.
    show: how fact runs are shown. ``"sentences"`` (default): passage sentences, one line per
        passage chunk with its title (stored Q/A runs stay word triples) — a triple often drops
        the words that answer, the sentence keeps them; with the default ``sentence_budget``
        (:data:`SENTENCE_BUDGET` tokens) the best of them, below. ``"triples"`` (the paper, the
        former default): their (pruned) edges in the cheapest encoding.
    cover_weight: 0 (the paper) keeps the fine ranking; above 0 the top runs are re-ordered
        greedily for coverage of the question's entities (fine score + ``cover_weight`` × the
        new entity matches a run adds), so each entity of a comparison or bridge question gets
        its own run before a second run on the same one.
    sentence_budget: with ``show="sentences"``, fill the facts block with the best sentences of
        the selected runs' passages up to this many tokens (default :data:`SENTENCE_BUDGET`; None:
        the shown edges' own sentences instead): ranked by fusion of ``sentence_rankings`` — ``"relevance"`` (default: the
        question cosine plus its passage's cosine with the question, the rarity-weighted share
        of the question's words it holds, a small bonus for a document's first sentence and, in the
        order that fills the budget only, the answer-typed share, :data:`RELEVANCE_WEIGHTS`), ``"question"`` (cosine of the
        titled sentence with the question alone), ``"edges"`` (the sentences the shown edges
        came from, in run order) and ``"passages"`` (passage rank, then text order) — and
        taken greedily while they fit, duplicates dropped. ``sentence_dense`` (default 5):
        vector search's top passages not among the runs' join the candidates (0: the runs'
        passages only). ``relevance_weights``: any of the ``"passage"``, ``"terms"`` and
        ``"lead"`` weights replaced (None: :data:`RELEVANCE_WEIGHTS`; 0 drops a term).
        :data:`~langgraph_kgmem.graphs.autopruned.SENTENCES_PRESET` is the compact reader setting.
        ``sentence_bridges`` (default True): a sentence taken that names another candidate
        passage's title (its subject) brings that passage's sentence closest to the question
        right after it — the second hop of a bridge question. The passages are the selected
        runs' (with ``dense_fusion``, the fused ranking's), so ``fine_m`` decides how many
        passages compete. ``sentence_cover`` (default :data:`SENTENCE_COVER`): the best sentence of
        each of the first N passages, ranked by their best sentence, goes in before the rest, so
        the passages the ranking puts on top are in the prompt; the evidence lists the shown
        passages in that ranking (``score`` 1 / place), which is what the benchmark grades.
        ``sentence_dense_places`` (default :data:`SENTENCE_DENSE_PLACES`): vector search's top N
        passages hold the first N places of that ranking, in its order; the others follow by their
        best sentence, so the fine ranking's passages add to vector search's top N, never replace one.
        ``sentence_answer_cover`` (default 0): the best answer-typed sentence (one holding a
        candidate of the asked type; needs ``relevance_weights["answer"]`` above 0) of each of the
        first N passages goes in first, where it has one. ``sentence_max_tokens`` (default None):
        a sentence of more tokens (a flattened table, a long list) is skipped when the budget is
        filled, unless no other sentence fits (its length read after ``sentence_clip``, so a cap at or
        above the clip skips nothing). ``sentence_clip`` (default :data:`SENTENCE_CLIP`): a
        sentence of more tokens is ranked whole but shown as its first ``sentence_clip`` tokens and
        " …" (:func:`~.sentences.clip_sentence`), so a flattened table or long list that ranks first
        no longer fills the budget alone and crowds the other passages out (None: shown whole).
    fusion / fusion_weak / fusion_strong (:class:`~langgraph_kgmem.graphs.fusion.FusionOptions`):
        with ``dense_fusion``, ``"fixed"`` (default) is the
        turn-taking below; ``"adaptive"`` gives the fine ranking a share of the first ``fine_m``
        places by its confidence (:func:`~.scoring.fine_confidence`): one place below
        ``fusion_weak``, every other place between, the fine ranking alone from ``fusion_strong``
        on (:func:`~langgraph_kgmem.ranking.adaptive_fuse`); the output's ``fusion`` records why.
    dense_fusion: ``True`` (default): the fact runs of the passages closest to the question
        by dense cosine (the top ``fine_m``) join the fine stage's candidates, and the runs are
        ordered by taking turns (:func:`~langgraph_kgmem.ranking.dense_led`) between the fine
        ranking and the dense passage ranking (read to the fusion depth), a
        passage bringing its best run, after vector search's best passage (the fine stage is
        blind to passage similarity); a fact run whose passages vector search ranks beyond
        that depth takes no turn and follows, and a stored question competes only through the
        passages its stored answers came from, on vector search's turns. So the selected runs'
        passages hold vector search's top passages and the fine stage's best near ones, never
        one far from the question ahead of them. Evidence ``score`` is then ``1 / place``. No
        LLM call; one passage similarity per question and the seeded runs' fine scores.
        ``False``: the fine ranking alone (the paper).
    extraction: "llm" extracts question/answer triples with the model; "offline" uses the
        rule parser even with a model (one LLM call per question: the answer).
    phrase_facts: "uncovered" (default) parses chunks without any KG relation edge with the
        phrase parser; "always" adds phrase triples to every chunk's facts (better recall over
        lower-case prose that an entity extractor misses, more tokens); "never".
    memorize / memorize_unanswered: store Q/A runs (not for "no answer" unless asked). An
        answer run is stored only when the answer is grounded (every content word of it in the
        passages it cites); for an ungrounded one the question run alone is stored.
    replay: give a stored answer again, without an LLM call, to the same question
        (:func:`~langgraph_kgmem.graphs.autopruned.codebook.question_key`: equal after NFKC, casefolding
        and punctuation/spacing normalisation) asked of the same decider, while each passage
        it cites is still in the KG and holds its words; ``replayed_answer`` then names the
        answer run, the question run, the cited passages and the decider. False: always answer anew.
    reuse (:class:`~langgraph_kgmem.graphs.reuse.ReuseOptions`; off by default): after the
        codebook's replay, the shared prior-run index: this method's own confirmed earlier run of
        the same question (any decider; answered, or "no answer" in the unchanged corpus) whose
        evidence list is exactly this run's gives its answer again without the answer call
        (:func:`~langgraph_kgmem.graphs.reuse.same_evidence_answer`); ``replayed_answer`` then
        names it (``{"run_id", "answer", "answered", "source": "reuse"}``) and nothing is
        memorized. ``reuse_similarity`` is not read: the same question only. With
        ``extraction="llm"``, a text (question or answer) the model already read for this
        tenant in this graph's lifetime is not read again: its triples are the ones it gave
        (``AutoprunedDeps.extract``, ``memo``).
    memory_scope: tenant labels of the codebook's store namespace, filled per run from
        ``config["configurable"]`` (``("{user_id}",)``: each user a codebook of their own, so
        no question, answer or run of one user reaches another; the KG's facts are indexed
        into each, once). None (default): every caller of this graph shares one codebook.
    consolidate / alias_threshold / entity_budget / layer2_min_cos: see
        :meth:`~langgraph_kgmem.graphs.autopruned.codebook.Codebook.consolidate`. ``entity_budget`` is a
        ceiling, not a target: layer 2 merges only pairs at cosine ≥ ``layer2_min_cos`` (the
        floor :data:`~langgraph_kgmem.graphs.autopruned.codebook.LAYER2_FLOOR`), so a codebook of
        unrelated entities stays over its budget rather than merge them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping, Sequence, get_args

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from langgraph_kgmem.errors import KgmemInputError, check_number
from langgraph_kgmem.graphs.autopruned.codebook import ALIAS_THRESHOLD, LAYER2_FLOOR
from langgraph_kgmem.graphs.autopruned.schemas import FineScoring
from langgraph_kgmem.graphs.fusion import FusionKwargs, FusionOptions
from langgraph_kgmem.graphs.prompt_overrides import PromptKwargs, PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseKwargs, ReuseOptions
from langgraph_kgmem.graphs.spec import AT_BUILD, MethodKwargs, memory_scope_field

Encoding = Literal["words", "ids", "matrix"]
Show = Literal["triples", "sentences"]
SentenceRanking = Literal["relevance", "question", "edges", "passages"]
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)
SENTENCE_RANKINGS: tuple[str, ...] = get_args(SentenceRanking)
# The "relevance" ranking's score of a sentence: its question cosine plus these, each weighed —
# "passage": its passage's cosine with the question (vector search's passage score), "terms": the
# share of the question's content words it holds, each weighed by its rarity among the candidate
# sentences (IDF), "lead": 1 for a document's first sentence (in encyclopedic text the one that says
# who or what the subject is); these three chosen on development sets only, never on the sets the docs report.
# "answer": the share of the offline answer step's best candidate score of the candidate it holds
# (answer_typed.answer_bearing), in the order that fills the budget only (never the passage places);
# chosen by the validation protocol (docs/methods/autopruned.md, "Answer-typed sentences")
RELEVANCE_WEIGHTS: dict[str, float] = {"passage": 2.0, "terms": 0.5, "lead": 0.05, "answer": 0.5}

# the default reader: the best sentences of the fused ranking's passages, SENTENCE_BUDGET
# tokens in all (245: the largest of the budgets tried whose prompt stays within half of dense
# top-5's on musique-train100 with MiniLM); SENTENCE_COVER and SENTENCE_DENSE_PLACES 0: the ones
# that put vector search's top passages in the prompt cost answer-in-prompt on hotpotqa-train100.
# Chosen on musique-train100 and hotpotqa-train100, HotpotQA dev held out (docs/methods/autopruned.md,
# "The default")
SENTENCE_BUDGET = 245
SENTENCE_COVER = 0
SENTENCE_DENSE_PLACES = 0
# a sentence over SENTENCE_CLIP tokens is shown cut to its first SENTENCE_CLIP tokens (the validation
# protocol's choice among None, 40, 50, 60 and 80; docs/methods/autopruned.md, "Long sentences clipped")
SENTENCE_CLIP: int | None = 60



class AutoprunedOptions(PromptOptions, ReuseOptions, FusionOptions):
    """AutoPrunedRetriever options (see
    :func:`~langgraph_kgmem.graphs.autopruned.create_autopruned_graph`; each one at length: this
    module's docstring). Prompts (``prompts``): overrides of
    :data:`~langgraph_kgmem.graphs.autopruned.prompts.PROMPTS`."""

    METHOD: ClassVar[str] = "create_autopruned_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.autopruned.prompts"

    selection_policy: SkipJsonSchema[Any] = Field(
        None, description="fn(channel, candidates, features) -> 'all' | 'unique' | 'none' per channel ('F' facts, "
                          "'Q' earlier questions, 'A' known answers); None: default_selection_policy")
    coarse_k: int = Field(200, ge=1, description="runs kept by the coarse score")
    fine_m: int = Field(20, ge=1, description="runs kept by the fine score, across channels")
    tau_run: float = Field(0.7, gt=0.0, le=2.0, json_schema_extra=AT_BUILD,
                           description="run segmentation: a triple joins the current run above this score (cosine "
                                       "to the run centroid + continuity bonus)")
    w_ent: float = Field(1.0, ge=0.0, description="coarse score weight of entity similarity")
    w_rel: float = Field(0.3, ge=0.0, description="coarse score weight of relation similarity")
    fine: SkipJsonSchema[Any] = Field(None, description="FineScoring weights and thresholds (None: FineScoring())")
    unique_threshold: float = Field(0.9, ge=-1.0, le=1.0,
                                    description="whole-run cosine at which two runs are one cluster ('unique')")
    encodings: Sequence[Encoding] = Field(ENCODINGS, description="prompt encodings tried (the cheapest in tokens "
                                                                 "is used)")
    max_prompt_tokens: int | None = Field(None, ge=1, description="drop the weakest runs until the packed codebook "
                                                                  "fits (None: no limit)")
    edges_per_run: int | None = Field(None, ge=1, description="prune each selected fact run to its k edges closest "
                                                              "to a question line (None: whole runs)")
    show: Show = Field("sentences", description="fact runs shown as their passages' sentences, or as (pruned) "
                                                "triples (the paper)")
    cover_weight: float = Field(0.0, ge=0.0, description="above 0: the top runs re-ordered greedily for coverage of "
                                                         "the question's entities")
    sentence_budget: int | None = Field(SENTENCE_BUDGET, ge=1,
                                        description="show='sentences': fill the facts block with the best-ranked "
                                                    "sentences up to this many tokens (None: the shown edges' own "
                                                    "sentences)")
    sentence_rankings: Sequence[SentenceRanking] = Field(("relevance",), description="sentence orders fused: "
                                                                                     "relevance, question, edges, "
                                                                                     "passages")
    sentence_bridges: bool = Field(True, description="a sentence naming another candidate passage's title brings "
                                                     "that passage's best sentence next")
    sentence_dense: int = Field(5, ge=0, description="vector search's top passages that join the sentence candidates")
    sentence_cover: int = Field(SENTENCE_COVER, ge=0,
                                description="the best sentence of each of the first N passages (ranked by their "
                                            "best sentence) goes in before the budget is filled by rank")
    sentence_dense_places: int = Field(SENTENCE_DENSE_PLACES, ge=0,
                                       description="vector search's top N passages hold the first N evidence "
                                                   "places, in its order; the others follow by their best sentence")
    sentence_answer_cover: int = Field(0, ge=0, description="the best answer-typed sentence of each of the first "
                                                            "N passages goes in first, where it has one")
    sentence_max_tokens: int | None = Field(None, ge=1, description="a sentence of more tokens is skipped when the "
                                                                    "budget is filled (None: no cap)")
    sentence_clip: int | None = Field(SENTENCE_CLIP, ge=1, description="a sentence of more tokens is shown cut to "
                                                                        "its first this many tokens and ' …' (None: "
                                                                        "whole)")
    relevance_weights: Mapping[str, float] | None = Field(
        None, description="any of the 'passage', 'terms' and 'lead' weights of the relevance ranking replaced "
                          "(None: RELEVANCE_WEIGHTS)")
    extraction: Literal["llm", "offline"] = Field("llm", description="question/answer triples by the LLM or the "
                                                                     "offline parser")
    phrase_facts: Literal["uncovered", "always", "never"] = Field(
        "uncovered", json_schema_extra=AT_BUILD,
        description="phrase-parser facts: for chunks without relation edges, for every chunk, or never")
    memorize: bool = Field(True, description="store the question's and (grounded) answer's runs")
    memorize_unanswered: bool = Field(False, description="store the question run of a 'no answer' reply too")
    experience: bool = Field(False, description="a grounded answer credits the passages it cites in the shared "
                                                "experience layer (half a person's feedback; docs/memory.md)")
    replay: bool = Field(True, description="give a stored, still grounded answer to the same question again")
    memory_scope: Sequence[str] | None = memory_scope_field("the codebook namespace")
    consolidate: bool = Field(True, json_schema_extra=AT_BUILD, description="merge entity aliases after memorising")
    alias_threshold: float = Field(ALIAS_THRESHOLD, gt=0.0, le=1.0, json_schema_extra=AT_BUILD,
                                   description="cosine at which entities are aliases")
    entity_budget: int | None = Field(None, ge=1, json_schema_extra=AT_BUILD,
                                      description="entities kept before k-means refinement (a ceiling)")
    layer2_min_cos: float = Field(LAYER2_FLOOR, ge=-1.0, le=1.0, json_schema_extra=AT_BUILD,
                                  description="lowest cosine a k-means merge accepts")
    fusion_weak: float = FusionOptions.with_default("fusion_weak", 0.45)
    fusion_strong: float = FusionOptions.with_default("fusion_strong", 0.85)

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`: the relevance weights, the selection policy and
        ``fine``."""
        super().check_values(opts)
        _check_weights(opts["relevance_weights"])
        policy = opts["selection_policy"]
        if policy is not None and not callable(policy):
            raise KgmemInputError(
                f"selection_policy must be a function (channel, candidates, features) -> 'all'|'unique'|'none', "
                f"got {type(policy).__name__}")
        if opts["fine"] is not None and not isinstance(opts["fine"], FineScoring):
            raise KgmemInputError(f"fine must be a FineScoring, got {type(opts['fine']).__name__}")

    def check_together(self) -> None:
        """Refuse a ``sentence_budget`` given with ``show="triples"`` (only sentences fill a budget) and fusion
        thresholds out of order.

        Raises:
            KgmemInputError: naming the options."""
        super().check_together()
        # the default budget belongs to the default show="sentences": only a budget given explicitly
        # with show="triples" is a mistake
        if self.sentence_budget is not None and self.show != "sentences" and "sentence_budget" in self.model_fields_set:
            raise KgmemInputError(f"{self.METHOD}: sentence_budget needs show='sentences' (it fills the facts "
                                  "block with sentences)")

    @property
    def scoring(self) -> FineScoring:
        """The fine stage's weights (``fine``, else the defaults)."""
        return self.fine or FineScoring()


def _check_weights(weights: Any) -> None:
    if weights is None:
        return
    if not isinstance(weights, Mapping):
        raise KgmemInputError(f"relevance_weights must be a mapping such as {RELEVANCE_WEIGHTS}, "
                              f"got {type(weights).__name__}")
    if set(weights) - set(RELEVANCE_WEIGHTS):
        raise KgmemInputError(f"relevance_weights keys must be among {sorted(RELEVANCE_WEIGHTS)}, got {sorted(weights)}")
    for key, value in weights.items():
        check_number(f"relevance_weights[{key!r}]", value, 0.0)


class AutoprunedKwargs(MethodKwargs, PromptKwargs, ReuseKwargs, FusionKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.autopruned.create_autopruned_graph`'s keyword options: the
    names and types of :class:`AutoprunedOptions` (defaults, bounds and descriptions: there)."""

    selection_policy: Any
    coarse_k: int
    fine_m: int
    tau_run: float
    w_ent: float
    w_rel: float
    fine: Any
    unique_threshold: float
    encodings: Sequence[Encoding]
    max_prompt_tokens: int | None
    edges_per_run: int | None
    show: Show
    cover_weight: float
    sentence_budget: int | None
    sentence_rankings: Sequence[SentenceRanking]
    sentence_bridges: bool
    sentence_dense: int
    sentence_cover: int
    sentence_dense_places: int
    sentence_answer_cover: int
    sentence_max_tokens: int | None
    sentence_clip: int | None
    relevance_weights: Mapping[str, float] | None
    extraction: Literal["llm", "offline"]
    phrase_facts: Literal["uncovered", "always", "never"]
    memorize: bool
    memorize_unanswered: bool
    experience: bool
    replay: bool
    memory_scope: Sequence[str] | None
    consolidate: bool
    alias_threshold: float
    entity_budget: int | None
    layer2_min_cos: float
