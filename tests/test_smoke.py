from django.conf import settings


def test_settings_load():
    assert settings.CPUTUNE_THROTTLE_TARGET == 0.10
