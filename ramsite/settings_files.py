"""The settings of what RAM stores as files: masked captures and other artifacts, run recordings,
downloads and uploads, stored browser profiles, and the storage that keeps them (files under
``var/`` in the embedded default, an S3-compatible bucket in production). ``ramsite/settings.py``
reads them through its one ``env``; each is documented in ``.env.example``."""

from pathlib import Path

from core.files import local_profile_key
from ramsite.settings_env import VAR_DIR, env

# Masked screenshots (artifacts) are kept through Django's storage API: files under
# var/artifacts in the embedded default; RAM_ARTIFACT_STORAGE=s3 keeps them in any
# S3-compatible bucket through django-storages (hosts that share no disk).
RAM_ARTIFACT_STORAGE = env.str("RAM_ARTIFACT_STORAGE", default="file")
RAM_ARTIFACT_DIR = Path(env.str("RAM_ARTIFACT_DIR", default="") or VAR_DIR / "artifacts")
# Captures older than this are deleted by the sweep (rows and stored files).
RAM_ARTIFACT_RETENTION_DAYS = env.int("RAM_ARTIFACT_RETENTION_DAYS", default=30)
# Run recordings (computers/recordings.py, executor/recording.py): on unless turned off here.
RAM_RECORDING = env.bool("RAM_RECORDING", default=True)
RAM_RECORDING_FPS = env.int("RAM_RECORDING_FPS", default=2)
RAM_RECORDING_SEGMENT_SECONDS = env.int("RAM_RECORDING_SEGMENT_SECONDS", default=60)
RAM_RECORDING_RETENTION_DAYS = env.int("RAM_RECORDING_RETENTION_DAYS", default=30)
RAM_RECORDING_MAX_MINUTES = env.int("RAM_RECORDING_MAX_MINUTES", default=120)
RAM_RECORDING_MAX_BYTES = env.int("RAM_RECORDING_MAX_BYTES", default=500 * 1024 * 1024)
# Files a computer's browser downloads become artifacts of the computer's account up to this size
# (a bigger one is refused: noted in the run's events, its file deleted); the step that started
# a download waits at most RAM_DOWNLOAD_WAIT_SECONDS for it to finish (later ones are reported
# with the run's next step).
RAM_DOWNLOAD_MAX_BYTES = env.int("RAM_DOWNLOAD_MAX_BYTES", default=50 * 1024 * 1024)
RAM_DOWNLOAD_WAIT_SECONDS = env.float("RAM_DOWNLOAD_WAIT_SECONDS", default=10.0)
# Files a harness uploads (POST /api/artifacts) for the ``upload`` tool: at most this size (the
# browser takes at most 50 MiB through its file chooser) and of one of these content types.
RAM_UPLOAD_MAX_BYTES = env.int("RAM_UPLOAD_MAX_BYTES", default=20 * 1024 * 1024)
_UPLOAD_CONTENT_TYPES = [
    "application/pdf",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "text/plain",
    "text/csv",
    "application/json",
    "application/xml",
    "application/zip",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
]
RAM_UPLOAD_CONTENT_TYPES = [
    t.strip().lower() for t in env.list("RAM_UPLOAD_CONTENT_TYPES", default=[]) or _UPLOAD_CONTENT_TYPES
]
# A computer's browser profile is stored in the artifact store at each clean stop of its executor
# (computers/profiles.py), encrypted on the server (AES-256-GCM) under a key derived per computer
# from RAM_PROFILE_STORE_KEYS (32 url-safe base64 bytes each): the first encrypts, every one
# decrypts (list a new key first to rotate). Every web host needs the same list; the embedded
# default generates one, kept 0600 under var/. The store alone never holds a key.
RAM_PROFILE_STORE_KEYS = env.list("RAM_PROFILE_STORE_KEYS", default=[]) or [local_profile_key(VAR_DIR)]
RAM_PROFILE_STORE_KEYS_SET = bool(env.list("RAM_PROFILE_STORE_KEYS", default=[]))
# A profile archive (without caches) larger than this is not stored (the last stored one stays).
RAM_PROFILE_STORE_MAX_BYTES = env.int("RAM_PROFILE_STORE_MAX_BYTES", default=100 * 1024 * 1024)
if not 1 <= RAM_PROFILE_STORE_MAX_BYTES <= 1024 * 1024 * 1024:
    raise ValueError("RAM_PROFILE_STORE_MAX_BYTES must be from 1 to 1073741824 (1 GiB).")
if not 1 <= RAM_RECORDING_FPS <= 10:
    raise ValueError("RAM_RECORDING_FPS must be from 1 to 10.")
if not 5 <= RAM_RECORDING_SEGMENT_SECONDS <= 600:
    raise ValueError("RAM_RECORDING_SEGMENT_SECONDS must be from 5 to 600.")
if RAM_RECORDING_MAX_MINUTES < 1 or RAM_RECORDING_MAX_BYTES < 1024 * 1024 or RAM_RECORDING_RETENTION_DAYS < 1:
    raise ValueError(
        "RAM_RECORDING_MAX_MINUTES and RAM_RECORDING_RETENTION_DAYS must be at least 1, RAM_RECORDING_MAX_BYTES at least 1 MiB."
    )
if not 1 <= RAM_DOWNLOAD_MAX_BYTES <= 2**31 - 1:
    raise ValueError("RAM_DOWNLOAD_MAX_BYTES must be from 1 to 2147483647.")
if not 1 <= RAM_UPLOAD_MAX_BYTES <= 50 * 1024 * 1024:
    raise ValueError("RAM_UPLOAD_MAX_BYTES must be from 1 to 52428800 (50 MiB).")
if not 0 <= RAM_DOWNLOAD_WAIT_SECONDS <= 20:
    raise ValueError("RAM_DOWNLOAD_WAIT_SECONDS must be from 0 to 20.")
if RAM_ARTIFACT_STORAGE == "s3":
    _ARTIFACTS: dict[str, object] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("RAM_ARTIFACT_S3_BUCKET"),
            "endpoint_url": env.str("RAM_ARTIFACT_S3_ENDPOINT_URL", default="") or None,
            "region_name": env.str("RAM_ARTIFACT_S3_REGION", default="") or None,
            "access_key": env.str("RAM_ARTIFACT_S3_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("RAM_ARTIFACT_S3_SECRET_ACCESS_KEY", default="") or None,
            "location": env.str("RAM_ARTIFACT_S3_PREFIX", default="") or "artifacts",
            # Private objects, read only through GET /api/artifacts/{id}: no public URL, no ACL.
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
elif RAM_ARTIFACT_STORAGE == "file":
    _ARTIFACTS = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": str(RAM_ARTIFACT_DIR),
            "base_url": None,
            # Never served as files: GET /api/artifacts/{id} reads them for the account's runner keys.
            "file_permissions_mode": 0o600,
            "directory_permissions_mode": 0o700,
        },
    }
else:
    raise ValueError("RAM_ARTIFACT_STORAGE must be file or s3.")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(VAR_DIR / "media")}},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": _ARTIFACTS,
}
