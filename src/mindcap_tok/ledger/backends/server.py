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
retry goes to the next one. Connection errors, timeouts, 408, 429 and 5xx are retried ``max_retries`` times
with exponential backoff and jitter (``Retry-After`` honoured, up to a minute); any other 4xx, a malformed
body or a finish reason other than ``stop``/``length`` fails the request (and so its shard) at once, in one
line. Retries never duplicate records: a request's records come from one response only.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ...errors import MindcapError, MissingExtraError, first_line
from ..jobs import ServerSpec
from . import ChatTokenizer, Completion, GenRequest

#: statuses worth another attempt (besides connection errors and timeouts)
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
#: the longest wait between attempts (backoff or Retry-After), in seconds
MAX_WAIT_S = 60.0
FINISH_REASONS = ("stop", "length")


class _Retry(Exception):
    """A failed attempt worth retrying; ``after`` is the server's Retry-After in seconds, if any."""

    def __init__(self, message: str, after: float | None = None) -> None:
        super().__init__(message)
        self.after = after


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def server_message(body: bytes | str, reason: str = "") -> str:
    """The error message of an error response, in one line: OpenAI's ``{"error": {"message"}}``, vLLM's older
    ``{"message"}``, else the body's first line."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        data = json.loads(text)
    except ValueError:
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


def _ids(value: object, what: str) -> tuple[int, ...] | None:
    """A list of token ids from a response, ``None`` when absent; anything else is a malformed response."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value):
        raise MindcapError(f"{what} is not a list of token ids")
    return tuple(value)


def _logprob_ids(logprobs: object, what: str) -> tuple[int, ...] | None:
    """Ids from ``logprobs`` returned with ``return_tokens_as_token_ids`` (tokens written ``token_id:123``):
    completions ``{"tokens": [...]}``, chat ``{"content": [{"token": ...}]}``; ``None`` when absent."""
    if not isinstance(logprobs, dict):
        return None
    if isinstance(logprobs.get("tokens"), list):
        tokens = logprobs["tokens"]
    elif isinstance(logprobs.get("content"), list):
        tokens = [t.get("token") if isinstance(t, dict) else None for t in logprobs["content"]]
    else:
        return None
    out = []
    for tok in tokens:
        if not (isinstance(tok, str) and tok.startswith("token_id:") and tok[9:].isdigit()):
            raise MindcapError(f"{what}: logprobs token {tok!r} is not 'token_id:N' (send return_tokens_as_token_ids)")
        out.append(int(tok[9:]))
    return tuple(out)


def parse_response(data: object, n: int, chat: bool) -> list[dict]:
    """Per choice (in index order): ``ids`` (or ``None``), ``prompt_ids`` (or ``None``), ``text`` and
    ``finish_reason``, from a completions or chat response body. A malformed body raises a
    :class:`MindcapError`; the finish reason is returned as sent (checked by the caller)."""
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise MindcapError("the response has no choices list")
    choices = data["choices"]
    index = [c.get("index") if isinstance(c, dict) else None for c in choices]
    if sorted(i for i in index if isinstance(i, int) and not isinstance(i, bool)) != list(range(n)):
        raise MindcapError(f"the response holds choices {index}, not indices 0..{n - 1}")
    top_prompt = _ids(data.get("prompt_token_ids"), "prompt_token_ids")
    out = []
    for c in sorted(choices, key=lambda c: c["index"]):
        where = f"choice {c['index']}"
        if chat:
            message = c.get("message")
            if not isinstance(message, dict):
                raise MindcapError(f"{where} has no message")
            text = message.get("content") or ""
        else:
            text = c.get("text")
        if not isinstance(text, str):
            raise MindcapError(f"{where}: text is not a string")
        ids = _ids(c.get("token_ids"), f"{where}: token_ids")
        if ids is None:
            ids = _logprob_ids(c.get("logprobs"), where)
        prompt = _ids(c.get("prompt_token_ids"), f"{where}: prompt_token_ids")
        out.append(
            {
                "ids": ids,
                "prompt_ids": prompt if prompt is not None else top_prompt,
                "text": text,
                "finish_reason": c.get("finish_reason"),
            }
        )
    return out


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
    run's warnings (default: one line on stderr each).
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
            raise MindcapError("the server backend needs a URL: --base-url http://HOST:8000/v1 or [server] base_url")
        if not (isinstance(opts.concurrency, int) and opts.concurrency >= 1):
            raise MindcapError(f"server concurrency must be an integer >= 1, got {opts.concurrency!r}")
        if not (isinstance(opts.max_retries, int) and opts.max_retries >= 0):
            raise MindcapError(f"server max_retries must be an integer >= 0, got {opts.max_retries!r}")
        if not opts.timeout_s > 0:
            raise MindcapError(f"server timeout_s must be > 0, got {opts.timeout_s!r}")
        if opts.endpoint not in ("completions", "chat"):
            raise MindcapError(f"server endpoint must be completions or chat, got {opts.endpoint!r}")
        self.options = opts
        self.urls = tuple(u.rstrip("/") for u in opts.base_url)
        self.served_model = opts.model or model
        self.headers = {}
        if opts.api_key_env:
            key = os.environ.get(opts.api_key_env, "")
            if not key.strip():
                raise MindcapError(f"the environment variable {opts.api_key_env} (server api_key_env) is unset/empty")
            self.headers["Authorization"] = f"Bearer {key.strip()}"
        self.tok = ChatTokenizer(model, tokenizer_name)
        self.backoff_s = backoff_s
        self.warn = warn or _stderr
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
        """``vllm X.Y`` from the first URL's ``/version`` (vLLM serves it beside ``/v1``), else ``unknown``."""
        url = self.urls[0]
        root = url[: -len("/v1")] if url.endswith("/v1") else url
        try:
            resp = self._httpx.get(root + "/version", headers=self.headers, timeout=min(5.0, self.options.timeout_s))
            version = resp.json().get("version") if resp.status_code == 200 else None
        except Exception:  # a hosted API has no /version; a dead server fails on the first request instead
            version = None
        return f"vllm {version}" if isinstance(version, str) and version else "unknown"

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
                raise MindcapError("a forcing continuation is sent as token ids: it needs endpoint = completions")
            body["messages"] = [{"role": "user", "content": req.user}]
        elif plain:
            if req.text is None:
                raise MindcapError("this server takes no token-id prompts, so forcing continuations cannot be sent")
            body["prompt"] = req.text
        else:
            body["prompt"] = list(req.prompt_ids)
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
            body["chat_template_kwargs"] = {"enable_thinking": False}  # as ChatTokenizer.chat
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
        sems = {url: asyncio.Semaphore(slots) for url in self.urls}
        limits = httpx.Limits(max_connections=slots * len(self.urls), max_keepalive_connections=slots * len(self.urls))
        async with httpx.AsyncClient(
            headers=self.headers, timeout=httpx.Timeout(self.options.timeout_s), limits=limits, follow_redirects=False
        ) as client:
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
        attempts = self.options.max_retries + 1
        for attempt in range(attempts):
            url = self.urls[(index + attempt) % len(self.urls)]
            async with sems[url]:
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
                await asyncio.sleep(wait)
        raise MindcapError(f"{self._label(req)} failed after {attempts} attempt(s): {last}")

    async def _post(self, client, url: str, body: dict):
        httpx = self._httpx
        self.attempts += 1
        endpoint = url + ("/chat/completions" if self.chat else "/completions")
        try:
            resp = await client.post(endpoint, json=body)
        except httpx.TimeoutException as exc:
            raise _Retry(f"{url} did not answer within {self.options.timeout_s:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retry(f"cannot reach {url} ({type(exc).__name__}: {_one_line(first_line(exc))})") from exc
        if resp.status_code in RETRY_STATUS or resp.status_code >= 500:
            message = server_message(resp.content, resp.reason_phrase)
            raise _Retry(f"{url} answered {resp.status_code}: {message}", retry_after(resp.headers.get("retry-after")))
        return resp

    def _refusal(self, url: str, resp, req: GenRequest) -> MindcapError:
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
        return MindcapError(f"{self._label(req)}: {url} answered {resp.status_code}: {message}{hint}")

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
            data = resp.json()
        except ValueError as exc:
            what = f"{self._label(req)}: {url} sent a malformed response"
            raise MindcapError(f"{what} (not JSON: {first_line(exc)})") from exc
        try:
            choices = parse_response(data, req.n, self.chat)
        except MindcapError as exc:
            raise MindcapError(f"{self._label(req)}: {url} sent a malformed response: {exc}") from exc
        return [self._completion(url, req, c) for c in choices]

    def _completion(self, url: str, req: GenRequest, choice: dict) -> Completion:
        finish = choice["finish_reason"]
        if finish not in FINISH_REASONS:
            raise MindcapError(
                f"{self._label(req)}: {url} ended a decode with finish_reason {finish!r} "
                "(not stop/length: nothing stored)"
            )
        prompt = choice["prompt_ids"]
        if prompt is not None and prompt != tuple(req.prompt_ids):
            if not self.chat:
                at = next(
                    (i for i, (a, b) in enumerate(zip(prompt, req.prompt_ids, strict=False)) if a != b),
                    min(len(prompt), len(req.prompt_ids)),
                )
                raise MindcapError(
                    f"{self._label(req)}: the server's prompt ids differ from the local chat template's "
                    f"from position {at} ({len(prompt)} vs {len(req.prompt_ids)} ids)"
                )
        else:
            prompt = None
        ids, retokenized = choice["ids"], False
        if ids is None:
            ids, retokenized = tuple(self.tok.encode(choice["text"])), True
            if len(ids) > req.max_tokens:
                raise MindcapError(
                    f"{self._label(req)}: the text from {url} re-encodes to {len(ids)} tokens, above "
                    f"the cap {req.max_tokens} (does it serve a model with the job's tokenizer?)"
                )
            self._once(
                "retokenized",
                f"{url} returns no token ids: output ids are re-encoded from the text with "
                f"{self.tok.resolved.name}, marked retokenized = true (decode-then-encode does not round-trip)",
            )
        return Completion(tuple(ids), finish, prompt, retokenized)
