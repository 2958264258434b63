"""Every user-visible error message, in one place. Tests assert these verbatim."""

QUESTION_EMPTY = "The question is empty. Type what you want researched."
QUESTION_SAYS_NOTHING = (
    "The question has no letter or digit (only spaces, punctuation, control or invisible characters). "
    "Type what you want researched."
)
TEXT_UNSTORABLE = "{what} cannot be stored: it holds {reason}."
QUESTION_TOO_LONG = "The question is {length} characters long; the limit is {limit}."
TEMPLATE_UNKNOWN = "Unknown template '{template}'. Known templates: {known}."
CORPUS_UNKNOWN = "Unknown corpus '{corpus}'. Known corpora: {known}."
WEB_UNAVAILABLE = "Web search is not available in this process; choose a local corpus."
CORPUS_RESERVED = "The corpus name 'web' is reserved for the open web; choose another name."
RUN_UNKNOWN = "No run with ID '{run_id}'."
RUN_ID_MALFORMED = "'{run_id}' is not a run ID (run IDs are 32 hexadecimal characters)."
LAST_EVENT_ID_MALFORMED = "Last-Event-ID (or ?after=) must be a whole number from 0 to {limit}, got '{value}'."
OPEN_RUN_UNREADABLE = (
    "'{text}' is neither a run ID (32 hexadecimal characters) nor the address of a run's page; paste either one."
)
VERSION_UNKNOWN = "Run '{run_id}' has no artifact version {version} (it has {have})."
NO_ARTIFACT = "Run '{run_id}' has no report yet (status: {status})."
INGEST_PATH_MISSING = "No such file or folder: {path}"
INGEST_UNSUPPORTED = "Unsupported file type '{suffix}' (supported: .md .txt .html .htm .pdf .jsonl)."
INGEST_CORRUPT = "Could not read {path}: {reason}"
INGEST_LINK_OUTSIDE = "Refused {path}: it is a link to {target}, outside the folder being ingested ({root})."
INGEST_LINK_BROKEN = "Refused {path}: it is a link to nothing ({target} does not exist)."
INGEST_NAME_UNDECODABLE = "Refused {path}: its path is not valid UTF-8 (rename the file or its folder)."
INGEST_NOT_STORED = "Could not store {path}: {reason}; none of its documents were stored."
INGEST_FOLDER_UNREADABLE = "Could not list the folder {path}: {reason}"
PDF_NEEDS_PASSWORD = "it is an encrypted PDF (needs a password)"
PDF_NEEDS_CRYPTOGRAPHY = "it is an AES-encrypted PDF and the 'cryptography' package is not installed"
FILE_UNREADABLE = "Could not read {path}: {reason}"
CORPUS_NAME_INVALID = "Corpus names are 1-64 letters, digits, '-' or '_', got '{corpus}'."
SEARCH_QUERY_EMPTY = "The search query is empty."
QUERIES_FILE_BAD_LINE = "{path}:{line}: each line must be a JSON object with 'id' and 'query'."
WORKER_NEEDS_POSTGRESQL = (
    "`veracity worker` reads the run queue, which lives in PostgreSQL; with SQLite (this database) runs execute "
    "in `veracity serve` itself. Set VERACITY_DATABASE__URL to a postgresql+asyncpg:// URL to run workers."
)
RUN_INTERRUPTED = "The server stopped while this run was in progress; it did not finish."
RUN_NOT_RESUMED = "The process executing this run stopped and the run could not be resumed: {reason}."
RESUMES_SPENT = "it had been resumed {resumes} time(s) already, the most allowed, and stopped again"
RESUME_OFF = "resuming is turned off (VERACITY_LIMITS__MAX_RESUMES=0)"
RESUME_NO_CHECKPOINTS = "the process that found it keeps no checkpoints"
RESUME_CHECKPOINT_UNREADABLE = "its checkpoint could not be read ({error})"
RESUME_TEMPLATE_UNKNOWN = "its template '{template}' is not known to the process that found it"
RUN_CANCELLED = "Cancelled at the user's request; the run stopped before it finished."
RUN_ALREADY_FINISHED = "Run '{run_id}' has already finished ({status}); there is nothing to cancel."
LOOP_ABORT_DETAIL = (
    "The pre-persistence gate rejected {rejections} reports in a row (last: {problems}), so nothing was stored: "
    "the template asks for something these sources cannot give."
)
RUN_FAILED = "The run failed: {reason}"
JSONL_BAD_LINE = "{path}:{line}: {reason}"
ROUTE_NOT_FOUND = "There is nothing at {path}: see /docs for the API and / for the research desk."
METHOD_NOT_ALLOWED = "{method} is not allowed on {path} (allowed: {allowed})."
BODY_UNREADABLE = "The request body could not be read: it must be JSON (UTF-8, nested fewer than 1,000 levels)."
REQUEST_REFUSED = "The request was refused: {detail}"
REQUEST_INVALID = "The request is not valid: {details}"
UNEXPECTED_CLI_FAILURE = "unexpected error: {error} (set VERACITY_LOG_LEVEL=DEBUG to see where it happened)"
VERIFY_EMPTY = "Nothing to verify: give at least one item with 'id', 'claim' and 'sources'."

NOTHING_RELEVANT = "Nothing in {where} answers this question"
NOTHING_RELEVANT_CLOSEST = "Nothing in {where} answers this question; closest passages: {closest}"
ANSWERED_WITHHELD = (
    " ({count} sentence(s) cleared the relevance cut-off, but together they do not answer the question: withheld)"
)
SEARCH_FAILED = "the search failed on {failed} of {branches} branch(es) and nothing relevant was found: {errors}"
PAGES_UNREACHABLE = "the pages the search found could not be opened ({failed} failed): {errors}"
COMPOSER_FAILED = "the composer model failed: {error}"

# The run page's one outcome statement for a fallback: why nothing was written (one sentence per cause that
# ``runs.floor.fallback_kind`` reads from the reason), then what was found.
FALLBACK_NOTHING_RELEVANT = "Nothing retrieved answers the question, so nothing was written."
FALLBACK_SEARCH_UNREACHABLE = "The search could not be reached, so there was nothing to write from."
FALLBACK_MODEL_FAILED = "The model failed before it wrote a draft, so nothing was written."
FALLBACK_CHECKS_FAILED = "A draft was written but did not pass the checks, so none of it was shipped."
FALLBACK_FOUND = "What was found: {sentences} from {sources}, quoted below as retrieved — not a written answer."
FALLBACK_FOUND_NOTHING = "Nothing was found to show."
FALLBACK_CLOSEST = (
    "Nothing answered it; the closest: {sentences} from {sources}, quoted below as retrieved — not an answer."
)

DATABASE_FAILED = "the database could not be read or written (the details are in the server log)"
UNEXPECTED_FAILURE = "an unexpected error (the details are in the server log)"
REQUEST_FAILED = "The server could not answer this request: {reason}."
DATABASE_UNWRITABLE = "the database could not be written to: {reason}"
DATABASE_NO_ANSWER = "no answer within {seconds:g} s"

# Accounts, privacy and limits
USERNAME_INVALID = "A user name is 2–64 characters: letters, digits and . _ @ - (starting with a letter or digit)."
PASSWORD_LENGTH = "A password is {low}–{high} characters long."
PASSWORD_WEAK = "That password is too simple: use at least four different characters."
USERNAME_TAKEN = "The user name '{username}' is taken."
SIGNIN_FAILED = "That user name and password do not match an account."
SIGNIN_NEEDED = (
    "Sign in first: this server has accounts (a browser signs in at /signin; scripts send an API token as "
    "'Authorization: Bearer …')."
)
SIGNUP_CLOSED = "New accounts are made by an admin here (`veracity user add NAME`); ask yours."
TOKEN_NAME_EMPTY = "Give the token a name, e.g. the script that will use it."
TOKEN_NEEDS_ACCOUNT = (
    "API tokens belong to accounts; this server runs in single-user mode (no accounts), where the API needs none."
)
TOKEN_UNKNOWN = "No live API token with ID {token_id} of yours."
TOKEN_INVALID = "That API token is unknown or revoked."
ADMIN_ONLY = "Only an admin may do that."
CROSS_ORIGIN = "Refused: this request came from another site ({origin}). Use Veracity's own pages, or an API token."
CSRF_MISSING = "This form has expired or did not come from Veracity's own page. Reload the page and try again."
RUNS_PER_MINUTE = "You started {count} runs in the last minute (the limit is {limit}). Try again in {wait} s."
RUNS_AT_ONCE = "You have {count} runs queued or running (the limit is {limit}); wait for one to finish or cancel one."
STREAMS_AT_ONCE = "You have {count} live views open on this server (the limit is {limit}); close some tabs."
BODY_TOO_LARGE = "The request body is larger than this server accepts ({limit:,} bytes)."
HEADERS_TOO_LARGE = "The request's headers are larger or more numerous than this server accepts."
RUN_STILL_ACTIVE = "Run '{run_id}' is still {status}; cancel it (and let it stop) before deleting it."
NOT_LOOPBACK = (
    "Refusing to listen on {host}: without accounts anyone who can reach it could read and start every run. "
    "Turn accounts on (VERACITY_AUTH__ENABLED=true) and make an admin (`veracity user add NAME --admin`), "
    "or listen on 127.0.0.1."
)
PASSWORDS_DIFFER = "The two passwords differ; type the same password twice."
USER_UNKNOWN = "No account named '{username}'."
INGEST_TOO_LARGE = (
    "{path}: {size:,} bytes is larger than this server ingests ({limit:,}; VERACITY_CORPUS__MAX_FILE_BYTES); "
    "nothing of it was stored."
)
INGEST_TOO_MANY = (
    "{path}: {count:,} documents in one file is more than this server ingests ({limit:,}; "
    "VERACITY_CORPUS__MAX_DOCUMENTS_PER_FILE); nothing of it was stored."
)


# ---- uploads and corpora (the browser's documents) -----------------------------------------------------------------
UPLOAD_NO_FILES = "Choose at least one file to upload (.md .txt .html .pdf .jsonl)."
UPLOAD_NO_NAME = "A file was sent without a usable name; it was not read."
UPLOAD_BAD_NAME = "Refused '{name}': its name cannot be stored (rename the file)."
UPLOAD_DUPLICATE = "Refused the second '{name}': a file of that name was already sent in this upload."
UPLOAD_TOO_MANY_FILES = (
    "{count} files in one upload is more than this server takes ({limit}; VERACITY_CORPUS__MAX_UPLOAD_FILES)."
)
UPLOAD_FAILED = "The upload stopped: {reason}. Files finished before it stay stored."
UPLOAD_CUT_OFF = "The upload was cut off (the server stopped during it). Files stored before that: {stored}."
UPLOAD_UNKNOWN = "No upload {upload_id}."
UPLOAD_CORPUS_NEEDED = "Name the corpus to upload into: pick one of yours or type a new name."
CORPUS_NOT_YOURS = "Corpus '{corpus}' is not yours to change: ask its owner or an admin."
CORPUS_TAKEN = "The name '{corpus}' is taken by a corpus you cannot change; choose another name."
CORPUS_GONE = "No corpus '{corpus}'."
DOCUMENT_GONE = "No document {document} in corpus '{corpus}'."
CORPUS_UPLOADING = "Corpus '{corpus}' is receiving an upload ({upload}); delete it once that upload has ended."

# ---- follow-ups, refreshes and version changes ---------------------------------------------------------------------
REFRESH_UNDER_WAY = "Run {run_id} is being refreshed already (run {refresh}); its next version comes when that ends."
RUN_NOT_FINISHED = "Run {run_id} has no finished report to build on yet (it is {status})."
FOLLOW_UP_EMPTY = "Type the follow-up question."
VERSIONS_SAME = "Pick two different versions to compare."
UPLOADS_AT_ONCE = "You have {limit} uploads still ingesting; wait until one ends (VERACITY_CORPUS__UPLOADS_AT_ONCE)."
UPLOAD_INTERRUPTED = "The upload was interrupted (the server was stopping). Files finished before it stay stored."
REFRESH_OF_REFRESH = "Run {run_id} refreshes run {target}: refresh or follow up that run instead."
