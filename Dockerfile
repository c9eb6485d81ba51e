# One image for web, worker, beat and the one-shot migrate service (see docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CPUTUNE_DATA_DIR=/var/lib/cputune
WORKDIR /app

COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .
RUN mkdir -p /var/lib/cputune \
    && DEBUG=1 SECRET_KEY=build-only python manage.py collectstatic --noinput -v0 \
    && useradd --system --uid 10001 cputune && chown -R cputune /var/lib/cputune

USER cputune
EXPOSE 8000
CMD ["gunicorn", "cputune.wsgi", "-b", "0.0.0.0:8000", "-w", "3", "--timeout", "60", "--access-logfile", "-"]
