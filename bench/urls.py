"""The project's URLs and one more, served only by the bench's web server: an authenticated
endpoint that does nothing but the key check, the floor of the api table (every other endpoint's
cost over it is its own)."""

from django.http import HttpRequest, HttpResponse

from accounts.auth import READER_KEYS
from accounts.models import ApiKey
from core.api import Router, json_response, operation
from ramsite.urls import urlpatterns as project_urlpatterns

router = Router()


@operation(summary="The key check and nothing else (the bench's floor)", auth=READER_KEYS, responses={200: "{}"})
def key_check(request: HttpRequest, *, key: ApiKey) -> HttpResponse:
    return json_response({})


router.route("/api/bench/key-check", get=key_check)

urlpatterns = [*router.urls, *project_urlpatterns]
