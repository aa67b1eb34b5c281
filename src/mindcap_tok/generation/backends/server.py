"""The ``server`` backend: any OpenAI-compatible server (``vllm serve``, several of them, hosted APIs), over
asynchronous HTTP with ``httpx`` (extra ``server``).

A request is one ``POST {base_url}/completions`` (default) or ``/chat/completions`` with ``n = k``,
``max_tokens = cap``, the request's own ``seed`` and the job's sampling parameters. The completions endpoint
gets the prompt built locally by the model's chat template (:class:`ChatTokenizer`, as the other backends),
sent as token ids, so prompt ids are the other backends'; the chat endpoint lets the server apply its
template. vLLM's extensions ask for the ids back: ``return_token_ids`` (vLLM >= 0.10.2: ``token_ids`` per
choice, ``prompt_token_ids`` per choice (completions) or at the top (chat)), ``top_k``, ``stop_token_ids`` and,
with ``logprob_ids``, ``logprobs`` + ``return_tokens_as_token_ids`` (older vLLM: ``token_id:123`` tokens).

A server that refuses those extensions (a 400/422 to the first request sent to it) gets plain OpenAI requests
(the prompt as text) from then on. When no ids come back the text is re-encoded with the job's tokenizer and
the record is marked ``retokenized``; that is said once per run on stderr.

At most ``concurrency`` requests are in flight per URL; requests are spread round-robin over the URLs and a
retry goes to the next one. ``timeout_s`` is a deadline for each HTTP exchange as a whole (connect, send,
headers and body), not for each read: a server that trickles its answer, or accepts the connection and never
answers, is cut off at the deadline. Connection errors, timeouts, 408, 429, 5xx and malformed replies are
retried ``max_retries`` times with exponential backoff and jitter (``Retry-After`` honoured, up to a minute),
then fail the request (and so its shard) in one line naming the URL, the attempts and the time spent; any other
4xx fails it at once. A request keeps its slot between attempts at one URL and a retry at another URL goes
before first attempts waiting there, so a dead server ends a run after about ``(max_retries + 1) *
timeout_s`` plus the backoff, however many requests wait. Retries never duplicate records: a request's records
come from one response only.

Every reply is validated before anything is stored: exactly ``n`` choices with integer indices ``0..n-1``
(each once), token ids integers (not bools, not floats) in the tokenizer's range (added tokens included), at
most ``max_tokens`` output ids, ``length`` exactly at the cap and ``stop`` below it, or at it only when the
last id ends a decode (a stop id of the request or a special token: vLLM 0.32 reports ``stop`` when EOS is the
cap-th token). The reply's shape is a small strict pydantic model: strict mode refuses
every coercion (``true`` is not an index, ``1.0`` not a token id), which hand-written ``isinstance`` checks
missed (a bool is an int in Python); the options are checked by the spec layer's ``[server]`` rules
(:class:`mindcap_tok.spec.ServerSpec`). The rules that need the
request (``n``, the cap, the vocabulary) are plain checks after it; each problem is named in one line.
"""

from __future__ import annotations

import asyncio
import email.utils
import heapq
import itertools
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ...errors import BackendError, BadInputError, MindcapError, MissingExtraError, first_line
from ...spec import ServerSpec
from .base import ChatTokenizer, Completion, GenRequest

#: statuses worth another attempt (besides connection errors and timeouts)
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: the longest wait between attempts (backoff or Retry-After), in seconds
MAX_WAIT_S = 60.0
#: a token written by ``return_tokens_as_token_ids``
_TOKEN_ID = re.compile(r"token_id:([0-9]+)")
#: the deadline of the ``/version`` probe (at most ``timeout_s``) and the most of its body read
VERSION_TIMEOUT_S = 5.0
_VERSION_BYTES = 65_536
logger = logging.getLogger(__name__)


class _Retry(Exception):
    """A failed attempt worth retrying; ``after`` is the server's Retry-After in seconds, if any."""

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def server_message(body: bytes | str, reason: str = "") -> str:
    """The error message of an error response, in one line: OpenAI's ``{"error": {"message"}}``, vLLM's older
    ``{"message"}``, else the body's first line."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes
        lines = [line for line in text.splitlines() if line.strip()]
        return _one_line(lines[0]) if lines else reason or "empty body"
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return _one_line(err["message"])
    if isinstance(err, str) and err:
        return _one_line(err)
    if isinstance(data, dict) and data.get("message"):
        return _one_line(data["message"])
    return _one_line(json.dumps(data))


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or an HTTP date), within 0..MAX_WAIT_S."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), MAX_WAIT_S)


class _Strict(BaseModel):
    """A part of a reply: types exactly as JSON sends them (strict: no bool or float for an int), extra keys
    ignored."""

    model_config = ConfigDict(strict=True, frozen=True)


class _ChatToken(_Strict):
    token: str


class _Logprobs(_Strict):
    """``logprobs`` of a choice: completions' ``tokens``, chat's ``content``."""

    tokens: list[str] | None = None
    content: list[_ChatToken] | None = None


class _Message(_Strict):
    content: str | None = None


class _Choice(_Strict):
    index: int
    finish_reason: Literal["stop", "length"]
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: _Logprobs | None = None


class _CompletionChoice(_Choice):
    text: str


class _ChatChoice(_Choice):
    message: _Message


class _Completions(_Strict):
    choices: list[_CompletionChoice]
    prompt_token_ids: list[int] | None = None


class _ChatCompletions(_Strict):
    choices: list[_ChatChoice]
    prompt_token_ids: list[int] | None = None


def _show(value: object, limit: int = 40) -> str:
    """A value of a reply as JSON writes it, cut to ``limit`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested deeper than the encoder goes
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shape_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, in words: ``choice 2 has index true (input should be ...)``."""
    err = exc.errors(include_url=False)[0]
    loc = err["loc"]
    if len(loc) > 1 and loc[0] == "choices" and isinstance(loc[1], int):
        where, path = f"choice {loc[1]}", loc[2:]
    else:
        where, path = "the response", loc
    name = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    if err["type"] == "missing":
        return f"{where} has no {name}"
    subject = f"{where} has {name} {_show(err['input'])}" if name else f"{where} is {_show(err['input'])}"
    msg = "not a JSON object" if err["type"] == "model_type" else err["msg"][:1].lower() + err["msg"][1:]
    return f"{subject} ({msg})"


def _check_indices(choices: Sequence[_Choice], n: int) -> None:
    """Exactly ``n`` choices, indices ``0..n-1`` each once."""
    seen: dict[int, int] = {}
    for pos, c in enumerate(choices):
        if not 0 <= c.index < n:
            raise BackendError(f"choice {pos} has index {c.index}, not in 0..{n - 1}")
        if c.index in seen:
            raise BackendError(f"choices {seen[c.index]} and {pos} both have index {c.index}")
        seen[c.index] = pos
    if len(seen) < n:
        missing = min(set(range(n)) - set(seen))
        raise BackendError(f"{len(choices)} choice(s) for n = {n}: none has index {missing}")


def _check_ids(ids: list[int] | tuple[int, ...], vocab_size: int, where: str) -> None:
    """Every id in ``0..vocab_size-1`` (min and max first: a whole decode's ids are checked at C speed)."""
    if not ids or (min(ids) >= 0 and max(ids) < vocab_size):
        return
    t = next(t for t in ids if not 0 <= t < vocab_size)
    shown = str(t) if abs(t) < 10**24 else f"{'-' if t < 0 else ''}~2**{abs(t).bit_length() - 1}"
    raise BackendError(f"{where}: token id {shown} out of range 0..{vocab_size - 1}")


def _check_length(ids: tuple[int, ...], finish: str, max_tokens: int, where: str, stops: frozenset[int]) -> None:
    """At most the cap; ``length`` exactly at it, ``stop`` below it, or at it when the cap-th id ends the decode
    (one of ``stops``: vLLM 0.32 reports ``stop`` when EOS is the last token allowed, as transformers does)."""
    if len(ids) > max_tokens:
        raise BackendError(f"{where}: {len(ids)} output ids, above max_tokens {max_tokens}")
    if finish == "stop" and len(ids) == max_tokens and ids and ids[-1] in stops:
        return
    if (finish == "length") != (len(ids) == max_tokens):
        # a stop at the cap whose last id ends no decode was cut by the cap; a short ``length`` is usually the
        # server's context limit (vLLM's max_model_len): the cap was not the cut
        hint = (
            " (the server's context limit? raise its max model length or lower the cap)" if finish == "length" else ""
        )
        raise BackendError(f"{where}: finish_reason {finish!r} with {len(ids)} of max_tokens {max_tokens} tokens{hint}")


def _logprob_ids(logprobs: _Logprobs | None, where: str) -> tuple[int, ...] | None:
    """Ids from ``logprobs`` returned with ``return_tokens_as_token_ids`` (tokens written ``token_id:123``):
    completions ``{"tokens": [...]}``, chat ``{"content": [{"token": ...}]}``; ``None`` when absent."""
    if logprobs is None:
        return None
    if logprobs.tokens is not None:
        tokens = logprobs.tokens
    elif logprobs.content is not None:
        tokens = [t.token for t in logprobs.content]
    else:
        return None
    out = []
    for tok in tokens:
        match = _TOKEN_ID.fullmatch(tok)
        if match is None:
            raise BackendError(f"{where}: logprobs token {tok!r} is not 'token_id:N' (send return_tokens_as_token_ids)")
        out.append(int(match[1]))
    return tuple(out)


def parse_response(
    data: object, n: int, *, chat: bool, max_tokens: int, vocab_size: int, stops: frozenset[int] = frozenset()
) -> list[dict]:
    """Per choice (in index order): ``ids`` (or ``None``), ``prompt_ids`` (or ``None``), ``text`` and
    ``finish_reason``, from a completions or chat response body to a request for ``n`` decodes under
    ``max_tokens``, with a tokenizer of ``vocab_size`` ids whose ``stops`` (the request's stop ids and the
    special tokens) may end a decode. A reply that breaks any rule of the module docs raises a
    :class:`MindcapError` naming the first problem, before anything is returned."""
    try:
        reply = (_ChatCompletions if chat else _Completions).model_validate(data)
    except ValidationError as exc:
        raise BackendError(_shape_problem(exc)) from None
    choices: list[_ChatChoice | _CompletionChoice] = [*reply.choices]
    _check_indices(choices, n)
    if reply.prompt_token_ids is not None:
        _check_ids(reply.prompt_token_ids, vocab_size, "prompt_token_ids")
    out = []
    for c in sorted(choices, key=lambda c: c.index):
        where = f"choice {c.index}"
        ids = tuple(c.token_ids) if c.token_ids is not None else _logprob_ids(c.logprobs, where)
        if ids is not None:
            _check_ids(ids, vocab_size, where)
            _check_length(ids, c.finish_reason, max_tokens, where, stops)
        prompt = c.prompt_token_ids if c.prompt_token_ids is not None else reply.prompt_token_ids
        if c.prompt_token_ids is not None:
            _check_ids(c.prompt_token_ids, vocab_size, f"{where}: prompt_token_ids")
        text = (c.message.content or "") if isinstance(c, _ChatChoice) else c.text
        out.append(
            {
                "ids": ids,
                "prompt_ids": tuple(prompt) if prompt is not None else None,
                "text": text,
                "finish_reason": c.finish_reason,
            }
        )
    return out


@dataclass(frozen=True)
class _Answer:
    """A server's whole answer to one POST, read within the deadline."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    content: bytes


@dataclass
class _Progress:
    """How far an exchange got: the status once the headers came, the body bytes received since."""

    status: int | None = None
    received: int = 0


class _Slots:
    """At most ``n`` holders at a time; waiters are served by ``priority`` (lower first), then in arrival order.

    Hand-written: asyncio's ``Semaphore`` serves waiters in arrival order only, and a retry must not queue behind
    every first attempt of the run (see the module docs)."""

    def __init__(self, n: int) -> None:
        self.free = n
        self.waiters: list[tuple[int, int, asyncio.Future]] = []
        self._order = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiters, (priority, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as it was cancelled: pass the slot on
                self.release()
            raise

    def release(self) -> None:
        """Hand the slot to the first waiter still waiting, else free it."""
        while self.waiters:
            future = heapq.heappop(self.waiters)[2]
            if not future.done():
                future.set_result(None)
                return
        self.free += 1


def _run(coro):
    """Run a coroutine to completion, also from a thread that already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class ServerBackend:
    """Decode through one or more OpenAI-compatible servers (see the module docs).

    ``backoff_s`` is the first retry's base wait (doubled each attempt, jittered); ``warn`` receives the
    run's warnings (default: this module's logger, see :mod:`mindcap_tok._log`).
    """

    name = "server"
    #: ``generate`` takes ``on_request`` and calls it as each request finishes (run_job's progress)
    streams_requests = True

    def __init__(
        self,
        model: str,
        tokenizer_name: str,
        options: ServerSpec | None = None,
        *,
        backoff_s: float = 0.5,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise MissingExtraError("httpx", "server") from exc
        self._httpx = httpx
        opts = options or ServerSpec()
        if not opts.base_url:
            raise BadInputError("the server backend needs a URL: --base-url http://HOST:8000/v1 or [server] base_url")
        self.options = opts
        self.urls = tuple(u.rstrip("/") for u in opts.base_url)
        self.served_model = opts.model or model
        self.headers = {}
        if opts.api_key_env:
            key = os.environ.get(opts.api_key_env, "")
            if not key.strip():
                raise BadInputError(f"the environment variable {opts.api_key_env} (server api_key_env) is unset/empty")
            self.headers["Authorization"] = f"Bearer {key.strip()}"
        self.tok = ChatTokenizer(model, tokenizer_name)
        self.backoff_s = backoff_s
        self.warn = warn or logger.warning
        self.warned: set[str] = set()
        #: per URL: True once it refused vLLM's extensions (plain requests), False once it took them
        self.plain: dict[str, bool] = {}
        self.attempts = 0
        self.retries = 0
        self._next = 0
        self._jitter = random.Random()
        self.version = self._server_version()

    # -- set-up ---------------------------------------------------------------------------------------------------

    def _server_version(self) -> str:
        """``vllm X.Y`` from the first URL's ``/version`` (vLLM serves it beside ``/v1``), else ``unknown``; the
        probe as a whole gets at most :data:`VERSION_TIMEOUT_S` (and ``timeout_s``)."""
        url = self.urls[0]
        root = url[: -len("/v1")] if url.endswith("/v1") else url
        try:
            version = _run(self._fetch_version(root + "/version"))
        except Exception:  # a hosted API has no /version; a dead server fails on the first request instead
            version = None
        return f"vllm {version}" if isinstance(version, str) and version else "unknown"

    async def _fetch_version(self, url: str) -> object:
        """The ``version`` of the JSON object at ``url``, read within the probe's deadline."""
        async with (
            asyncio.timeout(min(VERSION_TIMEOUT_S, self.options.timeout_s)),
            self._httpx.AsyncClient(headers=self.headers, timeout=None) as client,
            client.stream("GET", url) as resp,
        ):
            if resp.status_code != 200:
                return None
            body = b""
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > _VERSION_BYTES:
                    return None
        data = json.loads(body)
        return data.get("version") if isinstance(data, dict) else None

    def _once(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.warn(message)

    # -- requests -------------------------------------------------------------------------------------------------

    @property
    def chat(self) -> bool:
        return self.options.endpoint == "chat"

    def body(self, req: GenRequest, plain: bool = False) -> dict:
        """The JSON body of one request; ``plain`` leaves out vLLM's extensions and sends the prompt as text.

        A request with a ``json_schema`` (a dict; read with ``getattr``, so requests without the field work too)
        asks for a reply matching it: ``response_format = {"type": "json_schema", "json_schema": {"name":
        "reply", "schema": ...}}``, OpenAI's spelling, which vLLM 0.32 reads (its ``ResponseFormat``); plain too.
        """
        body: dict = {
            "model": self.served_model,
            "n": req.n,
            "max_tokens": req.max_tokens,
            "seed": req.seed,
            "temperature": req.temperature,
        }
        if req.temperature > 0:
            body["top_p"] = req.top_p
        if self.chat:
            if req.user is None:
                raise BadInputError("a forcing continuation is sent as token ids: it needs endpoint = completions")
            body["messages"] = [{"role": "user", "content": req.user}]
        elif plain:
            if req.text is None:
                raise BackendError("this server takes no token-id prompts, so forcing continuations cannot be sent")
            body["prompt"] = req.text
        else:
            body["prompt"] = list(req.prompt_ids)
        if self.options.reasoning_effort:  # OpenAI's parameter: plain too
            body["reasoning_effort"] = self.options.reasoning_effort
        schema = getattr(req, "json_schema", None)
        if schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
        if plain:
            return body
        body["return_token_ids"] = True
        if req.temperature > 0 and req.top_k > 0:
            body["top_k"] = req.top_k
        if req.stop_ids:
            body["stop_token_ids"] = list(req.stop_ids)
        if self.chat:
            body["chat_template_kwargs"] = {"enable_thinking": self.tok.thinking}  # as ChatTokenizer.chat
        if self.options.logprob_ids:
            body["return_tokens_as_token_ids"] = True
            if self.chat:
                body["logprobs"], body["top_logprobs"] = True, 0
            else:
                body["logprobs"] = 0
        return body

    def generate(
        self, requests: list[GenRequest], on_request: Callable[[list[Completion]], None] | None = None
    ) -> list[list[Completion]]:
        """Send every request (asynchronously, bounded per URL); all succeed or a :class:`MindcapError` says
        which failed and why. ``on_request(completions)`` is called as each request succeeds, one at a time."""
        if not requests:
            return []
        start, self._next = self._next, self._next + len(requests)
        return _run(self._generate(requests, start, on_request))

    async def _generate(
        self, requests: list[GenRequest], start: int, on_request: Callable[[list[Completion]], None] | None
    ) -> list[list[Completion]]:
        httpx = self._httpx
        slots = self.options.concurrency
        sems = {url: _Slots(slots) for url in self.urls}
        limits = httpx.Limits(max_connections=slots * len(self.urls), max_keepalive_connections=slots * len(self.urls))
        async with httpx.AsyncClient(
            headers=self.headers, timeout=httpx.Timeout(None), limits=limits, follow_redirects=False
        ) as client:  # no per-read timeouts: _post holds each exchange to one deadline
            tasks = [
                asyncio.create_task(self._request(client, sems, start + i, r, on_request))
                for i, r in enumerate(requests)
            ]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    def _label(self, req: GenRequest) -> str:
        return f"request {req.name}" if req.name else f"request (seed {req.seed})"

    async def _request(
        self, client, sems: dict, index: int, req: GenRequest, on_request: Callable[[list[Completion]], None] | None
    ) -> list[Completion]:
        """One request's attempts (see the module docs): its slot at a URL is kept while the next attempt goes to
        the same URL, a retry at another URL waits before the first attempts there. A failure says how long the
        attempts took, from the first one's start."""
        attempts = self.options.max_retries + 1
        held: str | None = None
        start = 0.0
        try:
            for attempt in range(attempts):
                url = self.urls[(index + attempt) % len(self.urls)]
                if held != url:
                    if held is not None:
                        sems[held].release()
                        held = None
                    await sems[url].acquire(0 if attempt else 1)
                    held = url
                if attempt == 0:
                    start = time.monotonic()
                try:
                    done = await self._attempt(client, url, req)
                except _Retry as exc:
                    last, wait = exc, exc.after
                else:
                    if on_request is not None:
                        on_request(done)
                    return done
                if attempt + 1 < attempts:
                    self.retries += 1
                    if wait is None:
                        wait = min(MAX_WAIT_S, self.backoff_s * 2**attempt) * self._jitter.uniform(0.5, 1.0)
                    if self.urls[(index + attempt + 1) % len(self.urls)] != url:
                        sems[url].release()
                        held = None
                    await asyncio.sleep(wait)
        finally:
            if held is not None:
                sems[held].release()
        spent = time.monotonic() - start
        raise BackendError(
            f"{self._label(req)} failed after {attempts} attempt(s) in {spent:.1f} s: {last}",
            url=url,
            attempts=attempts,
        )

    async def _post(self, client, url: str, body: dict) -> _Answer:
        """One POST, the whole exchange (connect, send, headers, body) within ``timeout_s``."""
        httpx = self._httpx
        self.attempts += 1
        endpoint = url + ("/chat/completions" if self.chat else "/completions")
        got = _Progress()
        try:
            async with asyncio.timeout(self.options.timeout_s):
                resp = await self._exchange(client, endpoint, body, got)
        except TimeoutError as exc:
            raise _Retry(self._late(url, got)) from exc
        except httpx.TransportError as exc:
            raise _Retry(f"cannot reach {url} ({type(exc).__name__}: {_one_line(first_line(exc))})") from exc
        if resp.status_code in RETRY_STATUS or resp.status_code >= 500:
            message = server_message(resp.content, resp.reason_phrase)
            raise _Retry(f"{url} answered {resp.status_code}: {message}", retry_after(resp.headers.get("retry-after")))
        return resp

    @staticmethod
    async def _exchange(client, endpoint: str, body: dict, got: _Progress) -> _Answer:
        """POST ``body`` and read the answer whole, recording in ``got`` how far it came."""
        chunks = []
        async with client.stream("POST", endpoint, json=body) as resp:
            got.status = resp.status_code
            async for chunk in resp.aiter_bytes():
                got.received += len(chunk)
                chunks.append(chunk)
        return _Answer(resp.status_code, resp.reason_phrase, resp.headers, b"".join(chunks))

    def _late(self, url: str, got: _Progress) -> str:
        """The message of a deadline passed: no answer at all, or one that came too slowly."""
        within = f"within {self.options.timeout_s:g} s"
        if got.status is None:
            return f"no answer from {url} {within}"
        return f"no complete answer from {url} {within} (status {got.status}, received {got.received} bytes)"

    def _refusal(self, url: str, resp, req: GenRequest) -> BackendError:
        """The one-line error of a non-retryable answer, with a hint for a wrong key or model name."""
        hint = ""
        if resp.status_code in (401, 403):
            env = self.options.api_key_env
            hint = f" (check the key in ${env})" if env else " (no key sent: name its variable in [server] api_key_env)"
        elif resp.status_code == 404:
            hint = (
                f" (is {self.served_model!r} the served model name? GET {url}/models lists them; "
                "set [server] model; is the URL's path /v1?)"
            )
        message = server_message(resp.content, resp.reason_phrase)
        return BackendError(f"{self._label(req)}: {url} answered {resp.status_code}: {message}{hint}", url=url)

    async def _attempt(self, client, url: str, req: GenRequest) -> list[Completion]:
        plain = self.plain.get(url)
        resp = await self._post(client, url, self.body(req, plain=bool(plain)))
        if resp.status_code in (400, 422) and plain is None:
            # the first answer of this URL: maybe it takes no vLLM extensions; try the plain OpenAI request once
            retry = await self._post(client, url, self.body(req, plain=True))
            if retry.status_code < 300:
                self.plain[url] = True
                self._once(
                    f"plain {url}",
                    f"{url} refused vLLM's request extensions "
                    f"({server_message(resp.content, resp.reason_phrase)}): sending plain OpenAI requests, "
                    "prompts as text, no top_k",
                )
                resp = retry
        if resp.status_code >= 300:
            raise self._refusal(url, resp, req)
        self.plain.setdefault(url, False)
        try:
            data = json.loads(resp.content)
        except ValueError as exc:
            raise _Retry(f"malformed response from {url}: not JSON ({_one_line(first_line(exc))})") from exc
        except RecursionError as exc:  # the decoder's own depth guard
            raise _Retry(f"malformed response from {url}: JSON nested too deeply to read") from exc
        try:
            stops = frozenset(req.stop_ids) | self.tok.resolved.special_ids
            choices = parse_response(
                data,
                req.n,
                chat=self.chat,
                max_tokens=req.max_tokens,
                vocab_size=self.tok.resolved.vocab_size,
                stops=stops,
            )
        except MindcapError as exc:
            raise _Retry(f"malformed response from {url}: {exc}") from exc
        return [self._completion(url, req, c) for c in choices]

    def _completion(self, url: str, req: GenRequest, choice: dict) -> Completion:
        finish = choice["finish_reason"]
        prompt = choice["prompt_ids"]
        if prompt is not None and prompt != tuple(req.prompt_ids):
            if not self.chat:
                at = next(
                    (i for i, (a, b) in enumerate(zip(prompt, req.prompt_ids, strict=False)) if a != b),
                    min(len(prompt), len(req.prompt_ids)),
                )
                raise BackendError(
                    f"{self._label(req)}: the server's prompt ids differ from the local chat template's "
                    f"from position {at} ({len(prompt)} vs {len(req.prompt_ids)} ids)"
                )
        else:
            prompt = None
        ids, retokenized = choice["ids"], False
        if ids is None:
            ids, retokenized = tuple(self.tok.encode(choice["text"])), True
            if len(ids) > req.max_tokens:
                raise BackendError(
                    f"{self._label(req)}: the text from {url} re-encodes to {len(ids)} tokens, above "
                    f"the cap {req.max_tokens} (does it serve a model with the job's tokenizer?)"
                )
            self._once(
                "retokenized",
                f"{url} returns no token ids: output ids are re-encoded from the text with "
                f"{self.tok.resolved.name}, marked retokenized = true (decode-then-encode does not round-trip)",
            )
        return Completion(tuple(ids), finish, prompt, retokenized)
