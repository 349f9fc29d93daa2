"""The explorer's web app (Starlette): one page, its static JS and CSS, and a JSON API.

    GET  /                      the page (static/index.html); the views are drawn by
                                static/explorer.js from the API's answers
    GET  /api/info              the run: model, labels, methods, splits, legend
    POST /api/predict           the input view: {"text"} or {"premise", "hypothesis"} or
                                {"split", "index"}, and "all_layers" (bool)
    POST /api/edit              the example editor: {"original": a predict request,
                                "edited": another, "all_layers"}: both views and their diff
    POST /api/reduce            input reduction, step by step: the same input, "importance"
    GET  /api/dataset           a page of a split: split, page, per_page, sort, order,
                                wrong, max_credibility, label
    GET  /api/dataset.csv       every row of the same query (no paging) as CSV, to download
    GET  /api/training          the training-set view over a split's retrievals: split
    GET  /api/embedding         the embedding view of a DkNN layer: layer
    POST /api/embed             one input's place in it: the predict request and "layer"
    GET  /api/metrics           the metrics panel of a split: split
    POST /api/compare/predict   with a second run (explore.py --compare): the input view of
                                one request in both runs, {"a", "b"}
    GET  /api/compare/disagreements  the rows of a split the two runs predict differently:
                                split, kind (softmax or dknn), page, per_page
    GET  /api/progress          {done, total} blocks of a split being evaluated (split),
                                or null; answered without waiting for the session's lock

No request names a file: splits and evaluation files are chosen on the command line.
A bad request is a 4xx with {"error": one line}; an unexpected failure a 500 with one
line (its traceback goes to the server's log, never to the browser). Every computation
on the model runs under the session's lock (endpoints are plain functions, which
Starlette runs in its thread pool).
"""
import json
import os
import re
import traceback

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from deepknn.explorer import compare
from deepknn.explorer import metrics
from deepknn.explorer import queries
from deepknn.explorer.session import StaleRun
from nlp_utils import UserError

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'static')
MAX_BODY_BYTES = 64 * 1024          # a request body beyond this is refused (413)
# The page loads only its own script and style: no inline script, nothing from elsewhere.
PAGE_HEADERS = {'Content-Security-Policy': "default-src 'self'; style-src 'self' "
                "'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
                "base-uri 'none'; frame-ancestors 'none'",
                'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer'}


def error(status, message):
    return JSONResponse({'error': message}, status_code=status)


async def read_json_body(request):
    """The request's JSON object; HTTPException 413 past MAX_BODY_BYTES (read no
    further), UserError when it is not a JSON object."""
    raw = b''
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise HTTPException(413, 'request body over {} bytes; send a shorter text'.format(
                MAX_BODY_BYTES))
    try:
        body = json.loads(raw.decode('utf-8'))
        json.dumps(body, ensure_ascii=False).encode('utf-8')   # a lone surrogate fails
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise UserError('request body is not JSON ({}); send a JSON object'.format(
            str(problem).splitlines()[0]), 'request')
    except UnicodeEncodeError:
        raise UserError('request body holds a lone surrogate escape (\\ud800-\\udfff) that '
                        'is no character; send UTF-8 text', 'request')
    except RecursionError:
        raise UserError('request body is nested too deeply; send a flat JSON object',
                        'request')
    if not isinstance(body, dict):
        raise UserError('request body must be a JSON object, got {}'.format(
            type(body).__name__), 'request')
    return body


def flag(body, name):
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise UserError('{} must be true or false, got {!r}'.format(name, value), name)
    return value


def make_app(session, allowed_hosts=None, other=None):
    """The ASGI app over an ExplorerSession. `allowed_hosts`: Host header values the
    app answers (e.g. 127.0.0.1 and localhost, against DNS rebinding), None for any.
    `other`: a second ExplorerSession of the same dataset to compare with, or None."""

    async def page(request):
        return FileResponse(os.path.join(STATIC, 'index.html'), headers=PAGE_HEADERS)

    def info(request):
        session.check_current()
        return JSONResponse(dict(session.info(), compare=other.info() if other else None))

    async def compare_predict(request):
        body = await read_json_body(request)
        for run in (session, other):
            run.check_current()
        all_layers = flag(body, 'all_layers')
        return await run_locked(lambda: {'a': session.predict(body, all_layers),
                                         'b': other.predict(body, all_layers)})

    def compare_disagreements(request):
        for run in (session, other):
            run.check_current()
        params = dict(request.query_params)
        split = params.get('split', 'test')
        first, second = session.table(split), other.table(split)
        return JSONResponse(compare.disagreements(first, second, params.get('kind', 'softmax'),
                                                  queries.Query.from_params(params, [])))

    async def predict(request):
        body = await read_json_body(request)
        session.check_current()
        return await run_locked(lambda: session.predict(body, flag(body, 'all_layers')))

    async def edit(request):
        body = await read_json_body(request)
        session.check_current()
        return await run_locked(lambda: session.edit(
            body.get('original'), body.get('edited'), flag(body, 'all_layers')))

    async def reduce(request):
        body = await read_json_body(request)
        session.check_current()
        importance = body.get('importance', 'gradient')
        return await run_locked(lambda: session.reduce(body, importance))

    def dataset(request):
        session.check_current()
        params = dict(request.query_params)
        table = session.table(params.get('split', 'test'))
        return JSONResponse(table.page(queries.Query.from_params(params, table.label_names)))

    def dataset_csv(request):
        session.check_current()
        params = dict(request.query_params)
        table = session.table(params.get('split', 'test'))
        text = table.csv(queries.Query.from_params(params, table.label_names))
        return Response(text, media_type='text/csv; charset=utf-8', headers={
            'Content-Disposition': 'attachment; filename="{}_selection.csv"'.format(
                re.sub(r'[^A-Za-z0-9_-]', '_', table.name))})

    def training(request):
        session.check_current()
        return JSONResponse(session.training(request.query_params.get('split', 'test')))

    def layer_embedding(request):
        session.check_current()
        return JSONResponse(session.embedding(request.query_params.get('layer', '')))

    async def embed(request):
        body = await read_json_body(request)
        session.check_current()
        return await run_locked(lambda: session.embed_query(body, body.get('layer')))

    def split_metrics(request):
        session.check_current()
        return JSONResponse(metrics.split_metrics(session.table(
            request.query_params.get('split', 'test'))))

    def progress(request):
        return JSONResponse(session.progress.get(request.query_params.get('split', 'test')))

    async def no_icon(request):   # browsers ask for one; answer without a 404 in the log
        return Response(status_code=204)

    routes = [Route('/', page), Route('/favicon.ico', no_icon), Route('/api/info', info),
              Route('/api/predict', predict, methods=['POST']),
              Route('/api/reduce', reduce, methods=['POST']),
              Route('/api/edit', edit, methods=['POST']),
              Route('/api/dataset', dataset), Route('/api/dataset.csv', dataset_csv),
              Route('/api/training', training),
              Route('/api/progress', progress), Route('/api/metrics', split_metrics),
              Route('/api/embedding', layer_embedding),
              Route('/api/embed', embed, methods=['POST']),
              Mount('/static', StaticFiles(directory=STATIC), name='static')]
    if other is not None:
        routes += [Route('/api/compare/predict', compare_predict, methods=['POST']),
                   Route('/api/compare/disagreements', compare_disagreements)]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)] \
        if allowed_hosts else []
    return Starlette(routes=routes, middleware=middleware,
                     exception_handlers={UserError: user_error, HTTPException: http_error,
                                         Exception: unexpected_error})


async def run_locked(compute):
    """compute() (which takes the session's lock) in the thread pool, as JSON."""
    return JSONResponse(await run_in_threadpool(compute))


async def user_error(request, problem):
    return error(409 if isinstance(problem, StaleRun) else 400, str(problem))


async def http_error(request, problem):
    detail = problem.detail if isinstance(problem.detail, str) else 'bad request'
    return error(problem.status_code, '{}: {}'.format(detail, request.url.path)
                 if problem.status_code == 404 else detail)


async def unexpected_error(request, problem):
    traceback.print_exception(type(problem), problem, problem.__traceback__)
    return error(500, 'internal error ({}); the server log has the details'.format(
        type(problem).__name__))
